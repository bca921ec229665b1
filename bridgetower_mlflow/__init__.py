"""MLflow plugin and Project for the BridgeTower fine-tuning benchmark."""

__version__ = "0.1.0"

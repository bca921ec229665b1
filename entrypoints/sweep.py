"""`mlflow run . -e sweep`: the `bridgetower-mlflow sweep` command, importable without installing the package."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bridgetower_mlflow.cli import main

if __name__ == "__main__":
    main(["sweep", *sys.argv[1:]])

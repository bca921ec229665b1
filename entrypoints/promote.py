"""`mlflow run . -e promote`: the `bridgetower-mlflow promote` command, importable without installing the package."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bridgetower_mlflow.cli import main

if __name__ == "__main__":
    main(["promote", *sys.argv[1:]])

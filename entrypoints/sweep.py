import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # noqa: E401,E702
from bridgetower_mlflow.cli import main  # noqa: E402
if __name__ == "__main__":
    main(["sweep", *sys.argv[1:]])

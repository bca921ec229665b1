from bridgetower_mlflow.cli import main

if __name__ == "__main__":
    main(["train", *__import__("sys").argv[1:]])

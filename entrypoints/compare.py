from bridgetower_mlflow.compare.command import compare_command

if __name__ == "__main__":
    compare_command()

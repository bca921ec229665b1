from bridgetower_mlflow.sweep.command import sweep_command

if __name__ == "__main__":
    sweep_command()

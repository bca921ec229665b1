import json
import os


def record(event: str, **fields) -> None:
    path = os.environ.get("FAKE_HPU_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\n")

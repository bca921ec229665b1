"""A throwaway PostgreSQL cluster on loopback (initdb refuses root: run it as `postgres`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def pg_binary(name: str) -> str:
    """On PATH (this kind of machine), else where Debian's postgresql package puts it."""
    debian = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True)
    found = shutil.which(name) or next(iter(debian), None)
    if not found:
        raise RuntimeError(f"{name} not found: `make test` installs Debian's postgresql package")
    return str(found)


def _as_postgres(command: str) -> list[str]:
    if os.geteuid() == 0:
        return ["su", "postgres", "-s", "/bin/bash", "-c", command]
    return ["bash", "-c", command]


class PostgresCluster:
    def __init__(self, port: int):
        self.port = port
        self.folder = Path(tempfile.mkdtemp(prefix="bt-pg-"))
        self.data = self.folder / "data"

    @property
    def uri(self) -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/mlflow"

    def start(self) -> PostgresCluster:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
        subprocess.run(_as_postgres(f"{initdb} -D {self.data} -A trust -U postgres"), check=True,
                       capture_output=True, timeout=180)
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
        subprocess.run(_as_postgres(f"{pg_ctl} -D {self.data} -o '{options}' -l {self.folder}/log -w start"),
                       check=True, capture_output=True, timeout=120)
        import psycopg2

        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres")
        connection.autocommit = True
        connection.cursor().execute("CREATE DATABASE mlflow")
        connection.close()
        return self

    def stop(self) -> None:
        pg_ctl = pg_binary("pg_ctl")
        subprocess.run(_as_postgres(f"{pg_ctl} -D {self.data} -m immediate stop"), capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)

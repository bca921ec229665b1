"""An http(s) tracking URI's user:password@ moves into MLflow's credential variables; URIs are shown without it.

The real-process half (train, sweep, compare and `mlflow run` against a real basic-auth server and PostgreSQL,
every printed line grepped) is in test_secrets.py.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from importlib.metadata import version

import pytest

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.redact import redact_text, without_password
from bridgetower_mlflow.tracking.credentials import move_uri_credentials
from bridgetower_mlflow.tracking.links import runs_view_url

from tests.conftest import REPO, run_cli

URI, USER, PASSWORD = "MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"


def test_userinfo_moves_out_of_an_http_uri_percent_decoded():
    environ = {URI: "https://b%40b:p%40ss%3Aw%2Frd-1@tracking.example:5000/mlflow?x=1"}
    move_uri_credentials(environ)
    assert environ == {URI: "https://tracking.example:5000/mlflow?x=1", USER: "b@b", PASSWORD: "p@ss:w/rd-1"}


@pytest.mark.parametrize("uri, bare, password", [
    ("HTTPS://bob:pw-1@host:5000", "HTTPS://host:5000", "pw-1"),
    ("http://bob:p@ss:w-1@[::1]:5000/?q=a@b", "http://[::1]:5000/?q=a@b", "p@ss:w-1"),  # raw @: requests' reading
])
def test_only_the_userinfo_goes_whatever_the_scheme_case_host_or_query(uri, bare, password):
    environ = {URI: uri}
    move_uri_credentials(environ)
    assert environ == {URI: bare, USER: "bob", PASSWORD: password}


def test_a_user_alone_moves_and_an_explicit_password_stays():
    environ = {URI: "http://bob@host:5000", PASSWORD: "from-env-77"}
    move_uri_credentials(environ)
    assert environ == {URI: "http://host:5000", USER: "bob", PASSWORD: "from-env-77"}


def test_the_same_credentials_in_both_places_are_no_conflict():
    environ = {URI: "http://bob:pw-1@host", USER: "bob", PASSWORD: "pw-1"}
    move_uri_credentials(environ)
    assert environ == {URI: "http://host", USER: "bob", PASSWORD: "pw-1"}


@pytest.mark.parametrize("uri", ["postgresql://bob:pw-1@db/mlflow", "sqlite:///x/mlflow.db", "file:///x/mlruns",
                                 "databricks://profile", "http://host:5000", "mlruns"])
def test_other_uris_stay_as_they_are(uri):
    environ = {URI: uri}
    move_uri_credentials(environ)
    assert environ == {URI: uri}
    assert move_uri_credentials({}) is None


@pytest.mark.parametrize("explicit, differing", [({USER: "alice"}, USER),
                                                 ({USER: "bob", PASSWORD: "other-pw-2"}, PASSWORD)])
def test_conflicting_explicit_credentials_are_refused_and_never_overwritten(explicit, differing):
    environ = {URI: "http://bob:uri-pw-1@host:5000", **explicit}
    with pytest.raises(ConfigError) as caught:
        move_uri_credentials(environ)
    message = str(caught.value)
    assert message.startswith("MLFLOW_TRACKING_URI: invalid value 'http://***@host:5000'; allowed: ")
    assert message.endswith(f"allowed: the URI's user:password@ or {differing}, not both with different values")
    assert "uri-pw-1" not in message and "other-pw-2" not in message
    # the explicit ones stay; the URI loses its userinfo all the same (MLflow must not print it on the way out)
    assert environ == {URI: "http://host:5000", **explicit}


def test_a_conflict_is_one_error_line_from_the_cli():
    done = run_cli(["train", "--max-steps", "4", "--logging-steps", "2"],
                   env_extra={URI: "http://bob:uri-pw-1@127.0.0.1:9", USER: "alice"})
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: MLFLOW_TRACKING_URI: invalid value 'http://***@127.0.0.1:9'; allowed: "), line
    assert "uri-pw-1" not in line


@pytest.mark.parametrize("text, redacted, shown", [
    ("postgresql://bob:pw-1@db:5432/mlflow", "postgresql://***@db:5432/mlflow", "postgresql://bob:***@db:5432/mlflow"),
    ("mysql://bob:p%40ss@db/mlflow", "mysql://***@db/mlflow", "mysql://bob:***@db/mlflow"),
    # SQLAlchemy reads a password up to the first @ (a / in it is allowed), requests up to the last @ before a /
    ("postgresql://bob:pa/ss@db/mlflow", "postgresql://***@db/mlflow", "postgresql://bob:***@db/mlflow"),
    ("http://bob:p@ss@host:5000/x", "http://***@host:5000/x", "http://bob:***@host:5000/x"),
    ("http://:pw-1@host", "http://***@host", "http://:***@host"),
    ("postgresql://bob@db/mlflow?sslmode=require&password=pw-1", "postgresql://bob@db/mlflow?sslmode=require&password=***",
     "postgresql://bob@db/mlflow?sslmode=require&password=***"),
    ("sqlite:////tmp/x/mlflow.db", "sqlite:////tmp/x/mlflow.db", "sqlite:////tmp/x/mlflow.db"),
    ("http://127.0.0.1:5000/#/experiments/1", "http://127.0.0.1:5000/#/experiments/1",
     "http://127.0.0.1:5000/#/experiments/1"),
])
def test_uris_are_shown_without_their_password(text, redacted, shown):
    assert redact_text(text, known=[]) == redacted
    assert without_password(text) == shown


def test_the_ui_hint_for_a_database_store_runs_and_never_holds_the_password(monkeypatch):
    uri = "postgresql+psycopg2://bob:pw-1@db.example:5432/mlflow?sslmode=require"
    monkeypatch.setenv(URI, uri)
    url, hint = runs_view_url("3", "abc")
    assert url == "http://127.0.0.1:5000/#/experiments/3/runs/abc?workflowType=machine_learning" and "pw-1" not in hint
    command, _, note = hint.partition("; ")
    words = shlex.split(command)  # one shell word, quoted: `***` and `&` would mean something to the shell
    assert words == ["mlflow", "ui", "--backend-store-uri",
                     "postgresql+psycopg2://bob:***@db.example:5432/mlflow?sslmode=require", "--port", "5000"]
    assert note == "the password is left out: write it in place of ***"


def test_the_ui_hint_for_a_file_store_is_the_plain_command(monkeypatch, tmp_path):
    monkeypatch.setenv(URI, f"sqlite:///{tmp_path}/mlflow.db")
    assert runs_view_url("1")[1] == f"mlflow ui --backend-store-uri sqlite:///{tmp_path}/mlflow.db --port 5000"


def test_version_is_the_installed_distributions():
    done = run_cli(["--version"])
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"bridgetower-mlflow, version {version('bridgetower-mlflow')}\n" and done.stderr == ""


def test_version_imports_nothing_heavy():
    probe = ("import sys\nfrom bridgetower_mlflow.cli import main\n"
             "try:\n    main(['--version'])\nexcept SystemExit as exc:\n    code = exc.code\n"
             "print(code, sorted(m for m in ('torch', 'transformers', 'mlflow', 'datasets') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout + done.stderr[-2000:]

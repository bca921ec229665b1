"""An http(s) tracking URI's user:password@ moves into MLflow's own credential variables. Stdlib only.

MLflow prints its tracking URI's host (`View run ... at: <host>/...`) and its errors quote it, but never the
MLFLOW_TRACKING_USERNAME/PASSWORD it sends as basic auth. The CLI moves them once, at its entry, before
mlflow loads (move_process_credentials); every process it starts (sweep cells, ranks) inherits the variables and
the bare URI.
A database URI keeps its password (SQLAlchemy reads it nowhere else); it is only shown without it.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from urllib.parse import unquote

from ..environment import TRACKING_PASSWORD_ENV, TRACKING_URI_ENV, TRACKING_USER_ENV, export, tracking_credentials
from ..errors import ConfigError
from ..redact import REDACTED, redact_text

HTTP_SCHEMES = ("http", "https")


def move_process_credentials() -> None:
    """move_uri_credentials over this process's tracking variables, exported for what it loads and starts."""
    variables = tracking_credentials()
    try:
        move_uri_credentials(variables)
    finally:
        export(variables)  # the URI loses its userinfo even where the credentials conflict


def move_uri_credentials(variables: MutableMapping[str, str]) -> None:
    """Userinfo of an http(s) MLFLOW_TRACKING_URI -> MLFLOW_TRACKING_USERNAME/PASSWORD, percent-decoded.

    A variable already set to the same value is fine; set to another value, it is not overwritten: which one
    is meant cannot be known, so that is a ConfigError naming the variable. The URI loses its userinfo either
    way, so that nothing MLflow prints on the way out (a run marked FAILED) can hold it.
    """
    uri = variables.get(TRACKING_URI_ENV, "")
    scheme, separator, rest = uri.partition("://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, _ = authority.rpartition("@")  # requests' reading: the password may hold a raw @
    if not separator or scheme.lower() not in HTTP_SCHEMES or not at:
        return
    bare = rest[len(userinfo) + 1:]
    variables[TRACKING_URI_ENV] = f"{scheme}://{bare}"
    user, has_password, password = userinfo.partition(":")
    moved = {TRACKING_USER_ENV: unquote(user), TRACKING_PASSWORD_ENV: unquote(password) if has_password else ""}
    moved = {name: value for name, value in moved.items() if value}
    differing = [name for name, value in moved.items() if variables.get(name) not in (None, "", value)]
    if differing:
        shown = redact_text(f"{scheme}://{REDACTED}@{bare}")  # a user alone may be a token
        raise ConfigError(TRACKING_URI_ENV, shown, f"allowed: the URI's user:password@ or "
                                                   f"{' and '.join(differing)}, not both with different values")
    variables.update(moved)

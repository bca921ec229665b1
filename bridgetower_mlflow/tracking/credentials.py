"""An http(s) tracking URI's user:password@ moves into MLflow's own credential variables. Stdlib only.

MLflow prints its tracking URI's host (`View run ... at: <host>/...`) and its errors quote it, but never the
MLFLOW_TRACKING_USERNAME/PASSWORD it sends as basic auth. The CLI moves them once, at its entry, before
mlflow loads; every process it starts (sweep cells, ranks) inherits the variables and the bare URI.
A database URI keeps its password (SQLAlchemy reads it nowhere else); it is only shown without it.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from urllib.parse import unquote

from ..errors import ConfigError
from ..redact import REDACTED, redact_text

URI_VARIABLE = "MLFLOW_TRACKING_URI"
USER_VARIABLE, PASSWORD_VARIABLE = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"
HTTP_SCHEMES = ("http", "https")


def move_uri_credentials(environ: MutableMapping[str, str] = os.environ) -> None:
    """Userinfo of an http(s) MLFLOW_TRACKING_URI -> MLFLOW_TRACKING_USERNAME/PASSWORD, percent-decoded.

    A variable already set to the same value is fine; set to another value, it is not overwritten: which one
    is meant cannot be known, so that is a ConfigError naming the variable. The URI loses its userinfo either
    way, so that nothing MLflow prints on the way out (a run marked FAILED) can hold it.
    """
    uri = environ.get(URI_VARIABLE, "")
    scheme, separator, rest = uri.partition("://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, _ = authority.rpartition("@")  # requests' reading: the password may hold a raw @
    if not separator or scheme.lower() not in HTTP_SCHEMES or not at:
        return
    bare = rest[len(userinfo) + 1:]
    environ[URI_VARIABLE] = f"{scheme}://{bare}"
    user, has_password, password = userinfo.partition(":")
    moved = {USER_VARIABLE: unquote(user), PASSWORD_VARIABLE: unquote(password) if has_password else ""}
    moved = {name: value for name, value in moved.items() if value}
    differing = [name for name, value in moved.items() if environ.get(name) not in (None, "", value)]
    if differing:
        shown = redact_text(f"{scheme}://{REDACTED}@{bare}")  # a user alone may be a token
        raise ConfigError(URI_VARIABLE, shown, f"allowed: the URI's user:password@ or "
                                                          f"{' and '.join(differing)}, not both with different values")
    environ.update(moved)

"""The one place where MLflow errors become one-line, secret-free TrackingErrors."""

from __future__ import annotations

from ..environment import tracking_user
from ..errors import TrackingError
from ..redact import first_line, redact_text

DENIED_CODES = {"PERMISSION_DENIED", "UNAUTHENTICATED"}


def tracking_uri() -> str:
    import mlflow

    return redact_text(mlflow.get_tracking_uri())


def tracking_error(action: str, exc: Exception) -> TrackingError:
    """A failed tracking call: permission and login problems say who may do it."""
    first = first_line(exc)
    uri = tracking_uri()
    user = tracking_user() or "the configured user"
    if "403" in first or "PERMISSION_DENIED" in first:
        return TrackingError(f"tracking: permission denied to {action} at {uri} for {user}; allowed: a user with "
                             "EDIT permission on the experiment")
    if "401" in first or "UNAUTHENTICATED" in first:
        return TrackingError(f"tracking: not authenticated to {action} at {uri}; allowed: credentials in "
                             "MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD, MLFLOW_TRACKING_TOKEN or "
                             "~/.mlflow/credentials")
    return TrackingError(f"tracking: cannot {action} at {uri}: {first}")


def registry_failure(exc: Exception, model_name: str) -> TrackingError:
    """A failed registry call as one line: permission problems name who may do it."""
    code = getattr(exc, "error_code", "")
    first = first_line(exc)
    if code in DENIED_CODES:
        return TrackingError(f"model-name: no permission to change registered model {model_name!r} ({code}: {first}); "
                             "allowed: a user with EDIT or MANAGE permission on it (MLFLOW_TRACKING_USERNAME)")
    return TrackingError(f"model-name: the registry refused the request for {model_name!r} "
                         f"({code or 'error'}: {first}); allowed: a reachable tracking server (MLFLOW_TRACKING_URI)")

"""The project's exception types; the CLI maps each to an exit status."""


class BridgeTowerMlflowError(Exception):
    """Base class: a one-line, user-facing message."""

    exit_code = 1


class ConfigError(BridgeTowerMlflowError):
    """A parameter is invalid: names the field, the bad value and what is allowed."""

    exit_code = 2

    def __init__(self, field: str, value, allowed: str):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}: invalid value {value!r}; {allowed}")


class AcceleratorUnavailable(BridgeTowerMlflowError):
    """The requested accelerator is absent or differs from what was detected."""

    exit_code = 2


class DataError(BridgeTowerMlflowError):
    """The dataset is missing, malformed or holds an undecodable image."""

    exit_code = 2


class TrackingError(BridgeTowerMlflowError):
    """The tracking server or registry refused or could not be reached."""

    exit_code = 2


class PromotionRefused(BridgeTowerMlflowError):
    """A promotion gate said no (only an error with --fail-if-not-promoted)."""

    exit_code = 1

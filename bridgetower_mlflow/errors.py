"""Every exception type a user can meet, with its exit status (cli_support.reports_errors maps them)."""


class BridgeTowerMlflowError(Exception):
    """Base class: a one-line, user-facing message."""

    exit_code = 1


class ConfigError(BridgeTowerMlflowError):
    """A parameter is invalid: names the field, the bad value and what is allowed."""

    exit_code = 2

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}: invalid value {value!r}; {allowed}")


class AcceleratorUnavailable(BridgeTowerMlflowError):
    """The requested accelerator is absent or differs from what was detected."""

    exit_code = 2


class DataError(BridgeTowerMlflowError):
    """The dataset is missing, malformed or holds an undecodable image."""

    exit_code = 2


class OutputUnwritable(BridgeTowerMlflowError):
    """The output folder (checkpoints, the model) cannot be written."""

    exit_code = 2


class TrackingError(BridgeTowerMlflowError):
    """The tracking server or registry refused or could not be reached."""

    exit_code = 2


class NothingTrained(BridgeTowerMlflowError):
    """Training ended without one optimizer step: there is no model and no loss to report."""

    exit_code = 2


class PromotionRefused(BridgeTowerMlflowError):
    """A promotion gate said no (only an error with --fail-if-not-promoted)."""

    exit_code = 1


class NoMatchingRuns(BridgeTowerMlflowError):
    """compare found no finished train run; the message names what was found instead."""

    exit_code = 2


class LaunchFailed(BridgeTowerMlflowError):
    """A rank of a multi-device run the project launched itself exited non-zero."""

    exit_code = 1



class DeviceDecodeUnavailable(Exception):
    """An on-device loader cannot start; train turns it into a ConfigError or, if allowed, a CPU fallback."""


class DiskFull(BridgeTowerMlflowError):
    """A write found no room (or a quota, or a read-only file system): an environment failure, not bad input.

    The message says what was being written, the folder, what it needed and had, and what to do."""

    exit_code = 1


class ResumeRefused(ConfigError):
    """A resume that cannot continue run `run_id`: the run stays exactly as it was (not even marked failed)."""

    def __init__(self, field: str, value: object, allowed: str, run_id: str = "") -> None:
        super().__init__(field, value, allowed)
        self.run_id = run_id

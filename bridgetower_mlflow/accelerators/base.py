"""The accelerator interface: the few things that differ between CPU, NVIDIA and Gaudi.

Vendor modules (habana_frameworks, optimum.habana, pynvml, pyhlml) are imported only inside methods.
Adapters keep no state between calls: what detection found travels in DeviceInfo.
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import DeviceDecodeUnavailable

if TYPE_CHECKING:
    from ..samplers.protocol import Sampler


@dataclass(frozen=True)
class DeviceInfo:
    """What detection found; becomes the `accelerator.*` run tags."""

    kind: str  # canonical tag value: cpu, a100, h100, h200, cuda, gaudi, gaudi2, gaudi3
    device_name: str
    count: int  # devices in the whole job
    memory_gb: float | None = None
    driver: str | None = None
    software: dict = field(default_factory=dict)  # software.<pkg> tags (cuda, synapseai, ...)
    extra_tags: dict = field(default_factory=dict)  # e.g. cuda.compute_capability
    training_path: str = "transformers"  # Gaudi: optimum-habana or native


@dataclass(frozen=True)
class RecipeSettings:
    """What of the run's configuration an adapter needs to build its training recipe."""

    training_kwargs: Mapping  # TrainingArguments kwargs every accelerator shares
    hf_args: tuple = ()  # the user's extra TrainingArguments flags (they win)
    precision: str = "auto"
    distribution_strategy: str = "ddp"
    world_size: int = 1
    throughput_warmup_steps: int = 3


@dataclass(frozen=True)
class TrainingRecipe:
    """How to train on this device: arguments and trainer classes with their keyword arguments."""

    arguments_class: type
    arguments_kwargs: Mapping
    trainer_class: type
    trainer_kwargs: Mapping = field(default_factory=dict)
    extra_params: Mapping = field(default_factory=dict)  # vendor settings that shaped the run
    precision: str = "fp32"  # what the run really computes in (the `precision` tag)
    ddp_backend: str | None = None
    callbacks: tuple = ()  # TrainerCallbacks the device needs (Gaudi lazy mode: mark_step)
    tags: Mapping = field(default_factory=dict)  # what the loaded stack reports (gaudi.execution_mode)

    def build_arguments(self) -> Any:
        return self.arguments_class(**self.arguments_kwargs)


@dataclass(frozen=True)
class DecodeRequest:
    """What an on-device decode loader needs: the raw split, the batch plan inputs, the image spec."""

    dataset: Any  # datasets.Dataset with an Image(decode=False) column and token ids
    batch_size: int
    seed: int
    image: Any  # data.cpu_images.ImageSpec
    num_workers: int
    device: DeviceInfo
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    drop_last: bool = True


@dataclass
class DeviceLoader:
    """A train loader that decodes on the device; yields batches already on the device."""

    name: str  # data_loader tag: nvjpeg, habana-mediapipe
    loader: Iterable
    length: int

    def cpu_decoded_images(self) -> int:
        """Images this loader had to decode on the CPU (the device refused them)."""
        return int(getattr(self.loader, "cpu_decoded_images", 0))


# the points of a training step the trainer marks (telemetry.steps.phases cuts the step at them)
INPUT_START, INPUT_END, FORWARD_END, GRADS_READY, BACKWARD_END, STEP_END = (
    "h2d_start", "h2d_end", "forward_end", "grads_ready", "backward_end", "step_end")
POINTS = (INPUT_START, INPUT_END, FORWARD_END, GRADS_READY, BACKWARD_END, STEP_END)


class StepClock(ABC):
    """Marks points of a training step on one clock and reads the time between two of them back later.

    A device clock records events on the device's stream: `ready` asks without waiting, so the step loop
    gains no host synchronization; `synchronize` waits, once, when training has ended.
    """

    source = ""  # the phases.clock tag

    @abstractmethod
    def mark(self) -> Any:
        """A marker of this instant (on a device: of the point the device's stream has reached)."""

    def ready(self, marker: Any) -> bool:
        return True

    @abstractmethod
    def seconds(self, start: Any, end: Any) -> float:
        """Seconds between two ready markers."""

    def synchronize(self) -> None:  # noqa: B027 - a host clock has nothing to wait for
        pass


class HostClock(StepClock):
    source = "host clock (time.perf_counter)"

    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, start: float, end: float) -> float:
        return end - start


class EventClock(StepClock):
    """A device's timing events (torch.cuda.Event, habana_frameworks.torch.hpu.Event: one API): a marker is an
    event recorded on the current stream; elapsed_time is in milliseconds."""

    def __init__(self, new_event: Callable[[], Any], synchronize: Callable[[], None], source: str) -> None:
        self._new_event, self._synchronize, self.source = new_event, synchronize, source

    def mark(self) -> Any:
        event = self._new_event()
        event.record()
        return event

    def ready(self, marker: Any) -> bool:
        return bool(marker.query())

    def seconds(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1000.0

    def synchronize(self) -> None:
        self._synchronize()


@dataclass(frozen=True)
class PhaseTiming:
    """How this device times the phases of a step: the clock, and what it cannot split (and why).

    `unmarked`: points of the step (POINTS) never marked, since marking there would change
    what runs (Gaudi lazy mode: recording an event cuts the graph); the phases on either side then merge.
    """

    clock: Callable[[], StepClock] = HostClock
    source: str = HostClock.source
    unmarked: frozenset[str] = frozenset()
    merged_why: str = ""  # why the merged phases are merged
    all_reduce: str = ""  # why the all-reduce is not timed by a DDP comm hook ("" = it may be)
    notes: tuple[str, ...] = ()  # what the named phases hold on this device


class Accelerator(ABC):
    """One adapter per family; `requested` is the user's accel value (h100, gaudi2, cuda...)."""

    device_decode_loader_name: str | None = None  # the data_loader tag of this family's device decode, if any
    distribution_strategies: tuple[str, ...] = ("ddp",)  # what recipe() can accept (it checks the installed stack)

    def __init__(self, requested: str):
        self.requested = requested

    def stack_environment(self, hf_args: tuple = ()) -> dict[str, str]:
        """Variables the device stack reads once, when torch loads it: set before `import torch`, in every rank."""
        return {}

    @abstractmethod
    def detect(self, devices_here: int, world_size: int, launcher: bool = False) -> DeviceInfo:
        """Check the hardware is present (and matches `requested`); raise AcceleratorUnavailable.

        `launcher`: this process only starts the ranks and must not open a device itself.
        """

    @abstractmethod
    def recipe(self, device: DeviceInfo, settings: RecipeSettings) -> TrainingRecipe:
        """The arguments and trainer this device trains with; raise ConfigError for impossible settings."""

    def launch_command(self, device: DeviceInfo, module_argv: list[str]) -> list[str]:
        """Command that starts `device.count` processes of `python -m bridgetower_mlflow ...`."""
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={device.count}", "-m", "bridgetower_mlflow", *module_argv]

    def device_decode_loader(self, request: DecodeRequest) -> DeviceLoader:
        """Build the on-device decode loader; raise DeviceDecodeUnavailable with the reason."""
        raise DeviceDecodeUnavailable(
            f"not supported on {self.requested}; allowed on gaudi2, gaudi3 (Habana media pipeline) "
            "and NVIDIA GPUs (nvJPEG)"
        )

    def device_samplers(self, device: DeviceInfo) -> list[Sampler]:
        """This device's samplers (samplers/), started by the system monitor."""
        return []

    def mlflow_gpu_count(self, device: DeviceInfo) -> int:
        """How many of `device` MLflow's own GPU collector watches (it reads NVML: NVIDIA's only)."""
        return 0

    def peak_memory_gb(self) -> float | None:
        return None

    def phase_timing(self, recipe: TrainingRecipe, args: Any) -> PhaseTiming:
        """The clock and the splits of a step's phases for a run of `recipe` with TrainingArguments `args`."""
        return PhaseTiming()

    def profiler_activities(self) -> list[Any]:
        """torch.profiler activities this device records (CPU always)."""
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU]

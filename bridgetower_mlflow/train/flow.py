"""The whole `train` flow on one screen: ranks and checks -> prepare -> open_run -> observing(fit) -> measure ->
close."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import TrainConfig

import contextlib
from pathlib import Path

from ..accelerators.installed import hide_if_broken
from ..accelerators.registry import get_accelerator
from ..environment import RunEnvironment, export_for_libraries, read_run_environment, self_launched, tracking_uri
from ..launch.ranks import RankInfo, needs_launch
from ..tracking.session import probe_server
from .checkpoints.output_folder import check_writable, holding
from .checkpoints.resume import run_to_resume
from .fit import fit, log_profile
from .launcher import launch_tracked
from .measure import measure
from .observe import observing
from .prepare import prepare
from .result import TrainResult
from .run import open_run, run_lifecycle


def train(config: TrainConfig, *, tracked: bool = True, environment: RunEnvironment | None = None) -> TrainResult:
    """One fine-tuning run (or, with devices > 1 and no outer launcher, the launcher of its ranks).

    `tracked=False` trains exactly as a non-main rank does: no run, nothing logged, no samplers.
    `environment`: the variables the run reads (read here when not given).
    """
    environment = environment or read_run_environment()
    ranks = RankInfo.from_env()
    check_writable(config.output_dir)
    # self-launched ranks train under their launcher's hold; a sweep's cells under their sweep's (two sweeps
    # may share a folder: every cell writes only into its own run's subfolder)
    owner = ranks.is_main and not self_launched() and not environment.sweep_cell
    with holding(config.output_dir) if owner else contextlib.nullcontext():
        return _train(config, ranks, tracked, environment)


def _train(config: TrainConfig, ranks: RankInfo, tracked: bool, environment: RunEnvironment) -> TrainResult:
    adapter = get_accelerator(config.accel)
    # before anything imports torch; torch_env: mpirun sets only its own names, torch.distributed reads these
    export_for_libraries(adapter.stack_environment(config.hf_args), ranks.torch_env())
    hide_if_broken("torchvision")  # transformers imports it when present: a broken one must not break runs
    if ranks.is_main and tracked:  # said in seconds, not after minutes of loading: no server, nothing to resume
        probe_server(tracking_uri())
        run_to_resume(config, environment.project_run_id)
    launcher = needs_launch(config.devices, ranks)
    device = adapter.detect(ranks.devices_here(config.devices), ranks.job_size(config.devices), launcher)
    if launcher:
        return launch_tracked(config, adapter, device, environment.project_run_id)
    prepared = prepare(config, adapter, device, ranks)
    # rank 0's run, or a NullRun: whatever escapes ends it, no run is left RUNNING
    with run_lifecycle(open_run(config, prepared, ranks, environment, tracked)) as run:
        prepared = prepared.in_run_folder(Path(config.output_dir) / (run.run_id or "run"))  # checkpoints go there
        with observing(prepared, run.session, ranks, environment.system_metrics) as observation:  # stopped as it ends
            fitted = fit(config, prepared, run, ranks, environment.progress_seconds, observation.window)
        log_profile(fitted, Path(str(prepared.args.output_dir)), run.session)
        measured = measure(config, prepared, fitted, observation.observed(), ranks, run.session is not None)
        return run.close(config, prepared, fitted, measured, ranks)

"""The run contract: every name `train` writes and `compare`/`promote`/`sweep` read. Stdlib only.

A writer and its readers import the same constant, so a rename cannot split them.
"""

from __future__ import annotations

# --- accelerator names (the `accel` values) and their families; device models are checked at detection --
CPU_NAMES = ("cpu",)
NVIDIA_NAMES = ("cuda", "a100", "h100", "h200")
GAUDI_NAMES = ("gaudi", "gaudi2", "gaudi3")
ACCELERATOR_KINDS = CPU_NAMES + NVIDIA_NAMES + GAUDI_NAMES
CPU_FAMILY, CUDA_FAMILY, GAUDI_FAMILY = "cpu", "cuda", "gaudi"
FAMILY_NAMES = {CPU_FAMILY: CPU_NAMES, CUDA_FAMILY: NVIDIA_NAMES, GAUDI_FAMILY: GAUDI_NAMES}


def accelerator_family(name: str) -> str | None:
    """cpu, cuda or gaudi for an accelerator name; None for a name that is none of them."""
    key = str(name).strip().lower()
    return next((family for family, names in FAMILY_NAMES.items() if key in names), None)


# --- run kinds (tag RUN_KIND_TAG) ----------------------------------------------------------------
RUN_KIND_TAG = "bridgetower.run_kind"
RUN_KIND_TRAIN, RUN_KIND_SWEEP, RUN_KIND_COMPARE = "train", "sweep", "compare"
RUN_KIND_RESUME = "project_resume"  # mlflow run's own run of a resume: its steps are in RESUMED_RUN_TAG's run

# --- MLflow's own tags ---------------------------------------------------------------------------
PARENT_RUN_TAG = "mlflow.parentRunId"
RUN_NAME_TAG = "mlflow.runName"
# on an experiment: what MLflow's UI opens it as. custom_model_development is the value its own "Machine learning"
# choice writes: the Model training view (runs, models) in every 3.x UI, and a user can change it there; finetuning
# opens the same view in 3.17 but is not a kind the UI lets a user change, nor one every 3.x UI's tabs know
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND_TRAINING = "mlflow.experimentKind", "custom_model_development"
NOTE_TAG = "mlflow.note.content"

# --- what ran: tags train writes -----------------------------------------------------------------
ACCELERATOR_TAG = "accelerator"
DEVICE_NAME_TAG = "accelerator.device_name"
DEVICE_COUNT_TAG = "accelerator.count"
DEVICE_MEMORY_TAG = "accelerator.memory_gb"
DRIVER_TAG = "accelerator.driver"
SOFTWARE_TAG_PREFIX = "software."
HOST_CPU_MODEL_TAG = "host.cpu_model"
HOST_CPU_COUNT_TAG = "host.cpu_count"
HOST_NAME_TAG = "host.name"
RAY_NODE_ID_TAG = "ray.node_id"  # the Ray node a sweep cell ran on (host names can repeat)
DATA_LOADER_TAG = "data_loader"
FALLBACK_REASON_TAG = "data_loader.fallback_reason"
DECODE_TAG = "decode"
INPUT_BOUND_TAG = "input_bound"
PRECISION_TAG = "precision"
WARMUP_TAG = "throughput.warmup_steps"
THROUGHPUT_NOTE_TAG = "throughput.note"
DATASET_TAG = "dataset"
DATASET_FINGERPRINT_TAG = "dataset.fingerprint"
EVAL_FINGERPRINT_TAG = "dataset.eval_fingerprint"
MODEL_PRESET_TAG = "model_preset"
RESUMED_TAG = "resumed"
RESUMED_RUN_TAG = "resumed.run"  # on a resume's project run: the run it continued
RESUMED_FROM_TAG = "resumed.from_step"  # the global step of the checkpoint a resumed run continued from
ERROR_TAG = "error"
ERROR_TAG_LIMIT = 2000  # characters of the reason a run did not finish (and of the printed error line)
MODEL_URI_TAG = "model_uri"
REGISTERED_MODEL_TAG = "registered_model"
EXECUTION_MODE_TAG = "gaudi.execution_mode"  # what the HPU bridge reports after import: lazy or eager
MFU_NOTE_TAG = "mfu.note"  # why there is no train_mfu
SM_COUNT_TAG = "cuda.sm_count"  # streaming multiprocessors CUDA reports (a MIG slice's own): its share of the peak
ENERGY_NOTE_TAG = "energy.note"  # why there is no train_energy_joules
ADVICE_TAG = "advice"  # one derived line: what to change next

# --- data loaders (tag DATA_LOADER_TAG: what actually ran) and decode classes (tag DECODE_TAG) ---
CPU_LOADER = "torch-cpu"  # data-loader workers decode on the CPU (OpenCV's fast path)
CPU_PILLOW_LOADER = "torch-cpu-pillow"  # the same, on Pillow alone: OpenCV missing or refused here
CPU_STUDY_LOADER = "torch-cpu-study"  # image_backend=study: the study's own transform (data/study_images.py)
MEDIAPIPE_LOADER = "habana-mediapipe"
NVJPEG_LOADER = "nvjpeg"
DEVICE_LOADERS = (MEDIAPIPE_LOADER, NVJPEG_LOADER)
DECODE_CPU, DECODE_DEVICE, DECODE_CPU_FALLBACK = "cpu", "device", "cpu-fallback"
DECODE_CLASSES = (DECODE_CPU, DECODE_CPU_FALLBACK, DECODE_DEVICE)


def decode_class(data_loader: str, device_decode_asked: bool) -> str:
    """Where JPEGs were decoded, from the loader that actually ran (train writes it as DECODE_TAG)."""
    if data_loader in DEVICE_LOADERS:
        return DECODE_DEVICE
    return DECODE_CPU_FALLBACK if device_decode_asked else DECODE_CPU


# --- input-bound bands (TensorFlow's input-pipeline analyzer) ---------------------------------------
INPUT_BOUND_BANDS = ((0.05, "no"), (0.20, "moderate"))
INPUT_BOUND_HIGH = "high"


def input_bound_label(wait_fraction: float) -> str:
    """<5 % no, 5-20 % moderate, >=20 % high."""
    for limit, label in INPUT_BOUND_BANDS:
        if wait_fraction < limit:
            return label
    return INPUT_BOUND_HIGH


# --- metrics -------------------------------------------------------------------------------------
THROUGHPUT_METRIC = "train_samples_per_second"
THROUGHPUT_PER_DEVICE_METRIC = "train_samples_per_second_per_device"
STEADY_SECONDS_METRIC = "train_steady_state_seconds"
MEASURED_STEPS_METRIC = "train_measured_steps"
# truth (issue 30): the window's rows as the Trainer ran them, and what inside the window was not training
MEASURED_SAMPLES_METRIC = "train_measured_samples"  # rows of the batches the window's steps ran, all ranks
WINDOW_EVAL_SECONDS_METRIC = "train_window_eval_seconds"  # evaluations run inside the window (eval_steps)
WINDOW_SAVE_SECONDS_METRIC = "train_window_save_seconds"  # checkpoint saves inside the window (save_steps)
RUNTIME_METRIC = "train_runtime"
TRAIN_LOSS_METRIC = "train_loss"
WAIT_METRIC = "dataloader_wait_fraction"
WAIT_ALL_STEPS_METRIC = "dataloader_wait_fraction_all_steps"
PEAK_MEMORY_METRIC = "device_peak_memory_gb"
CPU_DECODED_METRIC = "data_loader_cpu_decoded_images"  # images a device loader had to decode on the CPU
MODEL_FLOPS_METRIC = "model_flops_per_sample"  # forward + backward of one training sample, measured
TFLOPS_METRIC = "train_model_tflops_per_second"  # all devices, over the measured window
TFLOPS_PER_DEVICE_METRIC = "train_model_tflops_per_second_per_device"
MFU_METRIC = "train_mfu"  # model FLOPs utilization against the device's dense peak
ENERGY_METRIC = "train_energy_joules"  # device energy over the measured window, from hardware counters
JOULES_PER_SAMPLE_METRIC = "train_joules_per_sample"
EVAL_METRICS = ("eval_loss", "eval_recall_at_1", "eval_recall_at_5", "eval_runtime", "eval_samples_per_second")
CAPTION_MATCH_METRIC = "eval_caption_match_accuracy"
STEP_THROUGHPUT_METRIC = "step_samples_per_second"
STEP_WAIT_METRIC = "step_dataloader_wait_fraction"
LOGGED_TRAINER_KEYS = ("loss", "grad_norm", "learning_rate")
SYSTEM_PREFIX = "system/"
MONITOR_LATE_SAMPLES = "monitor_late_samples"  # system/...: samples more than two intervals after the previous one
MONITOR_MAX_GAP = "monitor_max_gap_seconds"  # system/...: the largest gap between two samples of the monitor

# --- time to quality (MLPerf's clock: the first training step's start to the end of the evaluation that reached
# the target, evaluations included) --------------------------------------------------------------------------
TARGET_METRICS = ("eval_loss", "eval_recall_at_1", "eval_recall_at_5")  # what every evaluation computes
LOWER_IS_BETTER = ("eval_loss",)
TARGET_TAG = "target"  # the canonical spelling: eval_recall_at_5>=0.2
TARGET_REACHED_TAG = "target.reached"  # true / false
TIME_TO_TARGET_METRIC = "time_to_target_seconds"  # evaluations included (MLPerf)
TIME_TO_TARGET_TRAIN_METRIC = "time_to_target_train_seconds"  # the same without the evaluations' own seconds
SAMPLES_TO_TARGET_METRIC = "samples_to_target"  # rows the steps up to the reaching evaluation ran, all ranks
STEPS_TO_TARGET_METRIC = "steps_to_target"  # optimizer steps (global step) of the reaching evaluation
TARGET_BEST_METRIC = "target_best_value"  # the best value of the target's metric any evaluation saw
EVAL_SAMPLES_INTERVAL_METRIC = "eval_samples_interval"  # samples between two evaluations (eval_steps x global batch)
EVALUATIONS_METRIC = "evaluations"  # evaluations the run made (the one at the end included)
# logged at each evaluation's global step beside its eval metrics: the x axes of the time-to-quality race
EVAL_CLOCK_METRIC = "eval_clock_seconds"  # the clock at this evaluation's end (first step's start; evals included)
EVAL_TRAIN_SAMPLES_METRIC = "eval_train_samples"  # training rows the steps up to this evaluation ran, all ranks
CHECKPOINT_STEP_TAG = "checkpoint.step"  # on a LoggedModel of a checkpoint and on a registered version
CHECKPOINT_URI_TAG = "checkpoint.uri"  # where a checkpoint's LoggedModel points (it is not copied)
REGISTER_CHECKPOINTS = ("best", "last")

# --- params --------------------------------------------------------------------------------------
PARAMS_FILE = "params_full.json"

# --- MLflow's limits (mlflow/utils/validation.py) ----------------------------------------------
MAX_PARAM_VALUE = 6000
MAX_KEY = 250
MAX_TAG_VALUE = 8000
NOTE_LIMIT = 7900  # a tag value, with room for a truncation notice
PARAMS_PER_BATCH = 100
RUN_NAME_LIMIT = 250  # the runs table's name column (PostgreSQL and MySQL enforce it)
EXPERIMENT_NAME_LIMIT = 256  # the experiments table's name column (a PostgreSQL store enforces it)
HUB_ID_LIMIT = 96  # huggingface_hub's longest repo id
NAME_BYTES_LIMIT, PATH_BYTES_LIMIT = 255, 4096  # a file name and a path on Linux (NAME_MAX, PATH_MAX)
METRICS_PER_BATCH = 900  # MLflow allows 1000 per log_batch

# --- spellings users type in MLproject -P values -------------------------------------------------
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")

# --- why a step costs what it costs (phase breakdown, step-time spread, profiler window, achievable MFU) ---
PHASE_DATA_WAIT, PHASE_HOST_TO_DEVICE = "data_wait", "host_to_device"
PHASE_FORWARD, PHASE_BACKWARD = "forward", "backward"
PHASE_OPTIMIZER, PHASE_ALL_REDUCE, PHASE_OTHER = "optimizer", "all_reduce", "other"
PHASES = (PHASE_DATA_WAIT, PHASE_HOST_TO_DEVICE, PHASE_FORWARD, PHASE_BACKWARD, PHASE_OPTIMIZER, PHASE_ALL_REDUCE,
          PHASE_OTHER)
PHASE_FORWARD_BACKWARD = "forward_backward"  # Gaudi lazy mode: forward and backward run as one graph at mark_step
PHASES_MERGED_TAG = "phases.merged"  # what was merged, and why
PHASES_NOTE_TAG = "phases.note"  # phases absent (never logged as 0), and why
PHASES_CLOCK_TAG = "phases.clock"  # device events or the host clock
BOTTLENECK_TAG = "bottleneck"
BOTTLENECK_INPUT, BOTTLENECK_HOST, BOTTLENECK_COMMUNICATION, BOTTLENECK_COMPUTE = (
    "input", "host", "communication", "compute")
BOTTLENECKS = (BOTTLENECK_INPUT, BOTTLENECK_HOST, BOTTLENECK_COMMUNICATION, BOTTLENECK_COMPUTE)
BOTTLENECK_SHARE = 0.20  # a phase at or above this share of the step names the bottleneck
STEP_SECONDS_P50_METRIC = "train_step_seconds_p50"
STEP_SECONDS_P90_METRIC = "train_step_seconds_p90"
STEP_SECONDS_P99_METRIC = "train_step_seconds_p99"
STEP_SECONDS_MAX_METRIC = "train_step_seconds_max"
STEP_SECONDS_CV_METRIC = "train_step_seconds_cv"
STEP_STALLS_METRIC = "train_step_stalls"  # steps slower than twice the median
STALL_FACTOR = 2.0
EPOCH_START_STEPS_METRIC = "train_epoch_start_steps"  # window steps that opened an epoch (the loader began again)
EPOCH_START_EXTRA_SECONDS_METRIC = "train_epoch_start_extra_seconds"  # their mean beyond the other steps' median
EPOCH_START_EXTRA_FRACTION_METRIC = "train_epoch_start_extra_fraction"  # that extra, summed, over the window
EPOCH_START_SHARE = 0.10  # an epoch start costing this share of the window is worth the advice line
ACHIEVABLE_TFLOPS_METRIC = "device_achievable_tflops"  # a short measured dense matmul rate at the run's dtype
MFU_ACHIEVABLE_METRIC = "train_mfu_achievable"
ACHIEVABLE_NOTE_TAG = "achievable.note"  # why there is no device_achievable_tflops
PROFILE_ARTIFACT_DIR = "profile"  # the profiler window's trace and its table of ops
PROFILE_TRACE_FILE = "trace.json.gz"  # Chrome/Perfetto trace, gzipped
PROFILE_TOP_OPS_FILE = "profile/top_ops.json"  # an MLflow table (log_table)
PROFILE_TOP_OPS = 15
PROFILE_STEP_LABEL = "train_step_"  # + the global step: a range around each profiled step in the trace


def phase_seconds_metric(phase: str) -> str:
    return f"train_phase_{phase}_seconds_per_step"


def phase_fraction_metric(phase: str) -> str:
    return f"train_phase_{phase}_fraction"


def step_phase_seconds_metric(phase: str) -> str:
    return f"step_phase_{phase}_seconds_per_step"


def step_phase_fraction_metric(phase: str) -> str:
    return f"step_phase_{phase}_fraction"


# A sweep's child runs: which grid cell and which repeat each one is (failed repeats stay in the record).
SWEEP_CELL_TAG = "sweep.cell"
SWEEP_REPEAT_TAG = "sweep.repeat"
# compare's results on its own run: metrics MLflow can chart across compare runs, and tables for load_table
SPEEDUP_METRIC_PREFIX = "speedup."  # + <gaudi>_vs_<gpu>.<setting>[.<what else differs>]
GATE_PASSED_METRIC = "gate_passed"  # 1.0 passed, 0.0 failed
GATE_WORST_RATIO_METRIC = "gate_worst_ratio"  # the lowest current / gated samples/s
COMPARE_CELLS_TABLE = "compare/tables/cells.json"  # mlflow.load_table(..., run_ids=[compare runs])
COMPARE_HEADLINE_TABLE = "compare/tables/headline.json"
COMPARE_SCALING_TABLE = "compare/tables/scaling.json"

# --- stopping a multi-device run (issue 31, every launcher's stop) -------------------------------
# After a stop signal the ranks get this long for their own cleanup (flush or spill, end the run) before
# anything SIGKILLs them: the self-launcher's wait, and mpirun's odls_base_sigkill_timeout (OpenMPI: 1 s).
STOP_GRACE_SECONDS = 25

# --- time to quality in compare (issue 44): compare's results on its own run, beside SPEEDUP_METRIC_PREFIX's ---
TIME_TO_TARGET_SPEEDUP_METRIC_PREFIX = "time_to_target_speedup."  # + <gaudi>_vs_<gpu>.<setting or best>[...]
SAMPLES_TO_TARGET_RATIO_METRIC_PREFIX = "samples_to_target_ratio."  # the Gaudi side's samples to target / the GPU's
GATE_QUALITY_FAILED_METRIC = "gate_quality_failed"  # quality checks that failed the gate (worse, or suspicious)
COMPARE_QUALITY_TABLE = "compare/tables/quality.json"  # each cell's quality per target (mlflow.load_table)

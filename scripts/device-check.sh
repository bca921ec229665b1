#!/usr/bin/env bash
# One pass on the lent NVIDIA machine, sized for one 10-minute call (it stops itself at BUDGET_S):
# `pytest -m cuda`, then the `large` preset at the study's settings (bf16, batch 48/device, fixed
# steps) for data-loader workers 0/1/2 x device decode off/on, interleaved (each row: samples/s, the loader
# wait, where a step goes (the phase breakdown in percent, the step-time p50/p90, the bottleneck) and the
# device's measured matmul rate with MFU against it), then the data-loader
# wait truth on the GPU, nvJPEG against the CPU path, and the loader capacity of the host's cores.
#
#   scripts/device-check.sh              on the device: its python3 (torch, transformers ... preinstalled)
#                                        plus the carried wheels (scripts/device-wheels.sh; carry .device-wheels)
#   scripts/device-check.sh --rehearse   the same script here: a venv with only torch (CPU) and the base
#                                        packages, the wheels installed with no index; accel=cpu, the tiny preset,
#                                        batch 8
# Writes at most 8 files to $OUT (default ./device-check-out) and prints the table with Python.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT="${OUT:-$REPO/device-check-out}"
WORK="${WORK:-$(mktemp -d)}"
BUDGET_S="${BUDGET_S:-470}"        # the whole script; each run gets what is left, at most RUN_S
RUN_S="${RUN_S:-120}"
START=$(date +%s)
mkdir -p "$OUT"
exec > >(tee "$OUT/device-check.log") 2>&1
left() { echo $(( BUDGET_S - ($(date +%s) - START) )); }

if [ "${1:-}" = "--rehearse" ]; then
  # batch 8: what the rehearsal proves is that the script runs and its table fills, not the study's batch
  MODE=rehearse; ACCEL=cpu; MODEL=tiny; PRECISION=auto; STEPS="${STEPS:-8}"; BATCH=8
  # The wheels and the device's python3 (its stand-in: a venv of device-rehearsal-base.txt) are made once per
  # version of what makes them and kept: the device does not build its python3 either. What the device does,
  # installing the carried wheels, happens fresh below. ~4 minutes a rehearsal on this 2-core machine.
  KEY=$(cat scripts/device-wheels.sh scripts/device-wheels.txt scripts/device-wheels-fallback.txt \
    scripts/device-rehearsal-base.txt <(python3 -VV) | sha256sum | cut -c1-12)
  KEPT="${REHEARSAL_CACHE:-$HOME/.cache/bridgetower-mlflow/device-rehearsal}/$KEY"
  WHEELS="$KEPT/wheels"; PY="$KEPT/python/bin/python"
  mkdir -p "$KEPT"
  exec 9>"$KEPT/.lock" && flock 9  # a second rehearsal waits for the first one's build instead of racing it
  if [ ! -e "$KEPT/.complete" ]; then
    rm -rf "$WHEELS" "$KEPT/python"
    REHEARSAL_WHEELS="$WHEELS" scripts/device-wheels.sh --rehearse && python3 -m venv "$KEPT/python" \
      && "$PY" -m pip install -q --no-index --find-links "$WHEELS/base" -r scripts/device-rehearsal-base.txt \
      && touch "$KEPT/.complete" || { echo "rehearsal environment failed"; exit 1; }
  fi
  flock -u 9
else
  MODE=device; ACCEL=cuda; MODEL=large; PRECISION=bf16; STEPS="${STEPS:-30}"; BATCH=48; WHEELS=.device-wheels
  PY=python3
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi
SITE="$WORK/site"
[ -d "$WHEELS/min" ] || { echo "no $WHEELS/min: run scripts/device-wheels.sh here and carry $WHEELS"; exit 1; }
# --no-compile: byte-compiling mlflow and its deps costs tens of seconds of the device budget
"$PY" -m pip install -q --no-compile --no-index --no-deps --target "$SITE" "$WHEELS"/min/*.whl || exit 1
"$PY" -c "import pydantic, anyio" 2>/dev/null || "$PY" -m pip install -q --no-compile --no-index --no-deps \
  --target "$SITE" "$WHEELS"/fallback/*.whl
export PYTHONPATH="$REPO:$SITE" MLFLOW_TRACKING_URI="sqlite:///$OUT/mlflow.db" BRIDGETOWER_MLFLOW_CACHE="$WORK/cache"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# the wheels went in with --no-compile: the first process to import a module writes its bytecode, so the dozen
# processes after it (six cells, the checks) do not compile mlflow and transformers again (~8 s each); a shell's
# PYTHONDONTWRITEBYTECODE would make every one of them compile from source
unset PYTHONDONTWRITEBYTECODE
# opening the sqlite store imports what every run needs (sqlalchemy, alembic, ...): a missing wheel fails
# here in seconds, with its name, instead of in each run
"$PY" -c 'import torch, transformers, mlflow, datasets
mlflow.MlflowClient().search_experiments()
print("mode", "'"$MODE"'", "torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers",
      transformers.__version__, "mlflow", mlflow.__version__, "store ok")' || { echo "import check failed"; exit 1; }
# every measured step inside one epoch: an epoch boundary restarts the data-loader workers mid-window
"$PY" -m bridgetower_mlflow sample-data --train-size $(( (STEPS + 1) * BATCH )) > /dev/null || exit 1

echo "== pytest -m cuda"
timeout "$(( $(left) < 120 ? $(left) : 120 ))" "$PY" -m pytest -q -m cuda -ra -p no:cacheprovider \
  tests/accelerators/test_accel_cuda.py > "$OUT/pytest-cuda.txt" 2>&1
echo "pytest rc=$?"; tail -5 "$OUT/pytest-cuda.txt"

echo "== throughput: $MODEL, $PRECISION, batch $BATCH/device, $STEPS steps (first 3 excluded), cells interleaved"
mkdir -p "$WORK/logs"
"$PY" -c 'import sys; sys.path.insert(0, "scripts"); from device_check import COLUMNS; print("\t".join(COLUMNS))' \
  > "$OUT/results.tsv"
for workers in 0 1 2; do
  for decode in false true; do
    name="$MODEL-w$workers-dd$decode"
    budget=$(( $(left) - 60 ))  # keep a minute for the checks after the table
    if [ "$budget" -lt 30 ]; then
      "$PY" scripts/device_check.py skipped "$workers" "$decode" >> "$OUT/results.tsv"
      continue
    fi
    timeout "$(( budget < RUN_S ? budget : RUN_S ))" "$PY" -m bridgetower_mlflow train --accel "$ACCEL" \
      --model "$MODEL" --dataset sample --per-device-train-batch-size "$BATCH" --dataloader-num-workers "$workers" \
      --device-decode "$decode" --allow-loader-fallback true --max-steps "$STEPS" --precision "$PRECISION" \
      --log-model false --max-eval-samples 16 --experiment-name device-check --run-name "$name" \
      --output-dir "$WORK/outputs" > "$WORK/logs/$name.log" 2>&1
    rc=$?
    "$PY" scripts/device_check.py row "$name" "$workers" "$decode" "$rc" >> "$OUT/results.tsv"
    echo "$name rc=$rc"
  done
done
"$PY" scripts/device_check.py table "$OUT/results.tsv" | tee "$OUT/results.txt"

echo "== data-loader wait on the $ACCEL: in-memory loader (< 5 %) vs injected slow loader (>= 20 %)"
[ "$(left)" -gt 40 ] && timeout "$(( $(left) - 30 ))" "$PY" benchmarks/bench_loader_wait.py --accel "$ACCEL" \
  --model "$([ "$MODE" = device ] && echo base || echo tiny)" --repeats 1 --steps 8 2>&1 \
  | grep -E "dataloader_wait_fraction|^ratio=" || echo "wait check: not finished in the budget"
echo "== nvJPEG against the CPU path"
[ "$(left)" -gt 20 ] && timeout "$(( $(left) - 10 ))" "$PY" scripts/device_check.py agreement 2>&1 | tail -1
echo "== loader capacity of this host's cores (no model)"
[ "$(left)" -gt 20 ] && timeout "$(( $(left) - 5 ))" "$PY" benchmarks/bench_loader_capacity.py --rounds 1 \
  --workers 0,1,2,4 --batches 4 2>&1 | tail -8 || echo "capacity: not finished in the budget"
tar -czf "$OUT/run-logs.tar.gz" -C "$WORK" logs 2>/dev/null
echo "elapsed $(( $(date +%s) - START )) s (budget $BUDGET_S s); files in $OUT: $(ls "$OUT" | tr '\n' ' ')"

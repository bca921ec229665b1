#!/usr/bin/env bash
# One pass on a lent NVIDIA machine (under 8 minutes): install, `pytest -m cuda`, then a throughput
# table of the `large` preset at the study's settings (batch 48/device, bf16, fixed steps) for
# data-loader workers 0/1/2 x device decode off/on. Results land in $OUT (or ./device-check-out).
set -uo pipefail
OUT="${OUT:-$PWD/device-check-out}"
STEPS="${STEPS:-30}"          # fixed max_steps per run; the first 3 are excluded from the headline
BUDGET_S="${BUDGET_S:-420}"   # stop starting new runs after this many seconds
START=$(date +%s)
mkdir -p "$OUT"
exec > >(tee "$OUT/device-check.log") 2>&1

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -m venv --system-site-packages .venv-device
. .venv-device/bin/activate
# torchvision must match the torch already on the machine: pin it to torch's release line
TORCH=$(python -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || echo "")
if [ -n "$TORCH" ]; then
  TV=$(python - "$TORCH" <<'PY'
import sys
major, minor = (int(x) for x in sys.argv[1].split(".")[:2])
print(f"torchvision~=0.{minor + 15}.0" if major == 2 else "torchvision")
PY
)
  pip install -q -e '.[cuda,test]' "torch==$TORCH" "$TV" || exit 1
else
  pip install -q -e '.[cuda,test]' || exit 1
fi
python -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "cuda", torch.cuda.is_available())'

python -m pytest -m cuda -q -ra tests/ 2>&1 | tail -25 | tee "$OUT/pytest-cuda.txt"

STORE="sqlite:///$OUT/mlflow.db"
export MLFLOW_TRACKING_URI="$STORE"
printf "workers\tdevice_decode\tdata_loader\tsamples_per_s\tper_device\tdataloader_wait\tinput_bound\tstatus\n" > "$OUT/results.tsv"
for decode in false true; do
  for workers in 0 1 2; do
    if [ $(( $(date +%s) - START )) -gt "$BUDGET_S" ]; then
      printf "%s\t%s\t-\t-\t-\t-\t-\tskipped (time budget)\n" "$workers" "$decode" >> "$OUT/results.tsv"; continue
    fi
    name="large-w${workers}-dd${decode}"
    timeout 150 python -m bridgetower_mlflow train --accel cuda --model large --dataset sample \
      --per-device-train-batch-size 48 --dataloader-num-workers "$workers" --device-decode "$decode" \
      --max-steps "$STEPS" --precision bf16 --experiment-name device-check --run-name "$name" \
      > "$OUT/$name.log" 2>&1
    rc=$?
    python - "$name" "$workers" "$decode" "$rc" >> "$OUT/results.tsv" <<'PY'
import sys
import mlflow
name, workers, decode, rc = sys.argv[1:]
runs = mlflow.search_runs(experiment_names=["device-check"], filter_string=f"tags.mlflow.runName = '{name}'")
if runs.empty:
    print(f"{workers}\t{decode}\t-\t-\t-\t-\t-\tfailed rc={rc}")
else:
    r = runs.iloc[0]
    get = lambda key: r.get(key, "-")
    print("\t".join(str(x) for x in (workers, decode, get("tags.data_loader"),
          get("metrics.train_samples_per_second"), get("metrics.train_samples_per_second_per_device"),
          get("metrics.dataloader_wait_fraction"), get("tags.input_bound"), f"rc={rc}")))
PY
  done
done
column -t -s $'\t' "$OUT/results.tsv" | tee "$OUT/results.txt"
echo "elapsed $(( $(date +%s) - START )) s"

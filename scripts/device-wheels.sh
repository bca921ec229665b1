#!/usr/bin/env bash
# Wheels the offline NVIDIA machine needs, downloaded here where pip reaches the registry, into the
# git-ignored .device-wheels/ that travels with the tree (`carry: [".device-wheels"]`, ~21 MiB).
#   scripts/device-wheels.sh              for the device: CPython 3.12, manylinux x86_64
#   scripts/device-wheels.sh --rehearse   for this machine's python3 (the rehearsal), plus the packages
#                                          the device has preinstalled (its "base", device-rehearsal-base.txt),
#                                          into .device-wheels-rehearse (or $REHEARSAL_WHEELS)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT=.device-wheels
PIP=("$PY" -m pip download -q --no-deps --only-binary=:all:)
pins() { grep -v '^#' "$1" | grep -v '^$'; }
if [ "${1:-}" = "--rehearse" ]; then
  OUT="${REHEARSAL_WHEELS:-.device-wheels-rehearse}"
  mkdir -p "$OUT/min" "$OUT/fallback" "$OUT/base"
  "${PIP[@]}" -d "$OUT/min" $(pins scripts/device-wheels.txt)
  "${PIP[@]}" -d "$OUT/fallback" $(pins scripts/device-wheels-fallback.txt)
  # the device's own packages, with what they need, minus torch (the rehearsal installs the local CPU build)
  "$PY" -m pip download -q --only-binary=:all: -d "$OUT/base" $(pins scripts/device-rehearsal-base.txt)
else
  mkdir -p "$OUT/min" "$OUT/fallback"
  TARGET=(--python-version 3.12 --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64)
  "${PIP[@]}" "${TARGET[@]}" -d "$OUT/min" $(pins scripts/device-wheels.txt)
  "${PIP[@]}" "${TARGET[@]}" -d "$OUT/fallback" $(pins scripts/device-wheels-fallback.txt)
fi
du -sh "$OUT"

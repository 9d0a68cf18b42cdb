#!/usr/bin/env bash
# GPU check for ha-bot's cost model: calibrate on the CUDA device, then run the accuracy benchmark
# there against the calibration and the matching built-in target (as is, and with curves derived
# from the calibration by ha_bot.calibrate.derive_for).
#
#   bash benchmarks/gpu_check.sh            # results under $OUT (or benchmarks/results/gpu/)
#
# Installs nothing: it needs the repository installed (`pip install -e .`) in a Python whose torch
# build sees CUDA, or whose onnxruntime has the CUDAExecutionProvider (onnxruntime-gpu); the
# onnxruntime engine is used when present (the same runtime as the CPU benchmark), else eager
# PyTorch with CUDA events. Exits 2 with a message when there is no CUDA. Budget: about 5 minutes
# (counting the models with fvcore dominates; HA_BOT_GPU_MODELS="resnet50 vit_b_16 ..." limits
# the model list, HA_BOT_GPU_BUDGET the calibration seconds).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
OUTDIR="${OUT:-benchmarks/results/gpu}"
BUDGET="${HA_BOT_GPU_BUDGET:-60}"

read -r ENGINE GPU_NAME < <("$PY" - <<'PY'
import sys
try:
    import onnxruntime as ort
    ort_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
except Exception:
    ort_cuda = False
try:
    import torch
    torch_cuda = torch.cuda.is_available()
    name = torch.cuda.get_device_name(0) if torch_cuda else ""
except Exception:
    torch_cuda, name = False, ""
engine = "onnxruntime" if ort_cuda else "torch" if torch_cuda else "none"
print(engine, name.replace(" ", "_") or "unknown_gpu")
PY
)
if [ "$ENGINE" = "none" ]; then
  echo "gpu_check: no CUDA here (torch.cuda.is_available() is False and onnxruntime has no CUDAExecutionProvider)" >&2
  exit 2
fi
mkdir -p "$OUTDIR"

case "$GPU_NAME" in
  *H200*) TARGET=nvidia_h200_sxm ;;
  *H100*PCIe*) TARGET=nvidia_h100_pcie ;;
  *H100*) TARGET=nvidia_h100_sxm ;;
  *A100*80GB*) TARGET=nvidia_a100_sxm_80gb ;;
  *A100*) TARGET=nvidia_a100_40gb ;;
  *L4*) TARGET=nvidia_l4 ;;
  *T4*) TARGET=nvidia_t4 ;;
  *4090*) TARGET=nvidia_rtx_4090 ;;
  *3090*) TARGET=nvidia_rtx_3090 ;;
  *) TARGET="" ;;
esac
echo "gpu_check: $GPU_NAME, engine $ENGINE, built-in target ${TARGET:-none}" >&2
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv > "$OUTDIR/nvidia_smi.csv" 2>/dev/null || true

"$PY" -m ha_bot.calibrate --out "$OUTDIR/calibration_cuda.yaml" --name "calibrated_$GPU_NAME" \
  --device cuda --engine "$ENGINE" --budget "$BUDGET" 2> >(tee "$OUTDIR/calibrate.log" >&2)

ARGS=(--calibration "$OUTDIR/calibration_cuda.yaml" --device cuda --engine "$ENGINE"
      --out "$OUTDIR/accuracy_cuda.json" --max-wait 120)
[ -n "$TARGET" ] && ARGS+=(--target "$TARGET")
# shellcheck disable=SC2086
[ -n "${HA_BOT_GPU_MODELS:-}" ] && ARGS+=(--models ${HA_BOT_GPU_MODELS})
"$PY" benchmarks/accuracy.py "${ARGS[@]}" | tee "$OUTDIR/accuracy_cuda.txt"
echo "gpu_check: results in $OUTDIR" >&2

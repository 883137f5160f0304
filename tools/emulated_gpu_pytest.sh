#!/usr/bin/env bash
# Runs pytest on the emulated CUDA device (tests/cpp/simt/emulated_driver.cpp): flow's CUDA path, from
# flow.Tensor.cuda() through eager ops, @flow.jit executables, the allocator and CUDA graphs, runs
# on a machine without a GPU. Kernels are compiled by the real NVRTC (sm_90) and their CUDA source
# runs on the host SIMT emulator; cuDNN and cuBLASLt calls are computed on the host from the
# libraries' documented semantics; the PyTorch reference runs on the CPU. Not a device: streams run
# in order at the call, and nothing here measures speed (docs/decisions.md).
# Usage: tools/emulated_gpu_pytest.sh [pytest arguments...]   (BUILD, PYTHON override the defaults)
#        tools/emulated_gpu_pytest.sh --bench-smoke            (bench/gpu.py --smoke: the GPU
#        benchmark script end to end at toy sizes; its timings mean nothing and are not kept)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
PYTHON=${PYTHON:-$root/.venv/bin/python}
dir="$BUILD/tests/cpp/emulated_cuda"
for lib in libcuda.so.1 libnvrtc.so.13 libcublasLt.so.13 libcudnn.so.9; do
  if [ ! -f "$dir/$lib" ]; then
    echo "emulated_gpu_pytest: $dir/$lib is missing; build the target flow_emulated_device (it needs the CUDA and cuDNN headers)" >&2
    exit 2
  fi
done
# A kernel cache of its own, outside the clone (a fresh CI clone reuses it; entries are keyed by
# content): the emulated images must never meet a real driver.
cache="${FLOW_EMULATED_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flow-emulated-kernels}"
mkdir -p "$cache"
export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FLOW_CUDA_LIB_PATH="$dir"
export FLOW_CACHE_DIR="$cache"
export PYTHONPATH="$root/python:$root/tests/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONFAULTHANDLER=1
cd "$root"
if [ "${1:-}" = "--bench-smoke" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  PYTHONPATH="$PYTHONPATH:$root/bench" OUT="$out" "$PYTHON" -W ignore "$root/bench/gpu.py" --smoke
  test -s "$out/gpu_bench_smoke.json"
  "$PYTHON" - "$out/gpu_bench_smoke.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
names = [w["name"] for w in r["workloads"]]
want = ["chain", "softmax", "layer norm", "topk", "sort", "index_add", "scatter_add", "uint8 normalize",
        "flow jit (heuristic)", "flow jit (exhaustive)",
        "flow jit + CUDA graph", "sum 2^28", "norm(-1)", "sum(0)", "conv3d"]
missing = [w for w in want if not any(w in n for n in names)]
assert not missing, f"bench/gpu.py --smoke produced no row for {missing}: {names}"
assert "library_counters" in r, "no library counters"
print(f"bench/gpu.py --smoke: {len(names)} rows, every workload ran (timings not kept)")
PY
  exit 0
fi
exec "$PYTHON" -m pytest -p no:cacheprovider "$@"

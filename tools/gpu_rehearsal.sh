#!/usr/bin/env bash
# Rehearses tools/gpu_check.sh without a GPU: builds flow as the GPU machine builds it
# (tools/gpu_cmake_args.sh: no LLVM, the Python module's libstdc++ static; and no oneDNN, which the
# GPU machine lacks too) from a copy of this working tree, then runs with that module the Python
# smoke test, every GPU-marked test and `bench/gpu.py --smoke` on the emulated CUDA device
# (tools/emulated_gpu_pytest.sh). What it catches before a GPU session spends device time: code that
# needs LLVM or oneDNN on the GPU path (CPU work in a GPU program), a module that fails to build or
# import as that machine builds it. What it cannot: device behaviour and speed.
#
# Needs `make build` first (the emulated libraries come from $BUILD, default ./build). The copy and
# its build live in build-gpu-rehearsal/ (git-ignored) and are reused: a second run rebuilds what
# changed. Usage: tools/gpu_rehearsal.sh [pytest arguments for the GPU tests, default: tests/python]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
PY=${PYTHON:-$root/.venv/bin/python}
JOBS=${JOBS:-$(nproc)}
work="$root/build-gpu-rehearsal"
tree="$work/tree"
emulated="$BUILD/tests/cpp/emulated_cuda"
if [ ! -f "$emulated/libcuda.so.1" ]; then
  echo "gpu_rehearsal: $emulated/libcuda.so.1 is missing: run \`make build\` first" >&2
  exit 2
fi

# The working tree as git sees it (tracked and untracked files, not ignored ones), modification
# times kept, so that the reused build recompiles only what changed.
rm -rf "$tree"
mkdir -p "$tree"
# (A tracked file deleted in the working tree is left out.)
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done |
  tar --null -T - -cf -) | tar -xf - -C "$tree"

# shellcheck source=tools/gpu_cmake_args.sh
source "$root/tools/gpu_cmake_args.sh"
gpu_cmake_args "$tree" "$work/build" "$PY" "$root"  # .deps/ (git-ignored) is the clone's
echo "[gpu_rehearsal] configure and build as the GPU machine does (no LLVM, no oneDNN)"
PYTHONPATH="$root/.deps${PYTHONPATH:+:$PYTHONPATH}" cmake "${cmake_args[@]}" -DFLOW_WITH_ONEDNN=OFF \
  -DFLOW_BUILD_PYTHON=ON > "$work/configure.log" 2>&1 || {
  tail -n 30 "$work/configure.log" >&2
  exit 1
}
cmake --build "$work/build" -j "$JOBS" --target _C > "$work/build.log" 2>&1 || {
  tail -n 30 "$work/build.log" >&2
  exit 1
}
echo "[gpu_rehearsal] module: $(ls "$tree"/python/flow/_C*.so)"

# The module in its three import orders (as gpu_check.sh's smoke step), on the emulated device.
export LD_LIBRARY_PATH="$emulated${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" FLOW_CUDA_LIB_PATH="$emulated"
smoke='import flow
x = (flow.ones(3).cuda() * 2).cpu()
assert x.tolist() == [2.0, 2.0, 2.0], x
y = flow.ones(3) * 0.5  # a CPU kernel: the interpreter in this build
assert y.tolist() == [0.5, 0.5, 0.5], y
print("ok:", flow.cuda.get_device_name())'
for prelude in "" "import torch" "import flow
import torch"; do
  PYTHONPATH="$tree/python" "$PY" -c "$prelude
$smoke" 2> "$work/smoke.err" || {
    cat "$work/smoke.err" >&2
    echo "gpu_rehearsal: the module fails with the prelude: ${prelude:-none}" >&2
    exit 1
  }
done

echo "[gpu_rehearsal] GPU-marked tests and bench/gpu.py --smoke with that module, on the emulated device"
workers=()
[ "$JOBS" -gt 1 ] && workers=(-n "$JOBS")
if [ $# -eq 0 ]; then set -- tests/python; fi
BUILD="$BUILD" PYTHON="$PY" bash "$tree/tools/emulated_gpu_pytest.sh" -q "${workers[@]}" -m gpu "$@"
BUILD="$BUILD" PYTHON="$PY" bash "$tree/tools/emulated_gpu_pytest.sh" --bench-smoke
echo "[gpu_rehearsal] passed"

#!/usr/bin/env bash
# The one script run on the GPU machine (H200, CUDA 13, no LLVM, no internet): configure without
# LLVM, build everything, run the C++ tests (the CUDA runtime test first, on its own), a smoke test
# of the Python module in three import orders, the GPU Python tests and the GPU benchmark, and
# write logs, JSON results and a summary under $OUT (./gpu_out when OUT is unset). Hard budget: FLOW_GPU_BUDGET_S seconds (default 470)
# for all steps together, each step under `timeout`; a step that would start with too little time
# left is recorded as skipped. Exit status 0 when every step that ran passed.
#
# Dependencies the machine may lack are taken from .deps/ (fill it here with
# tools/prepare_gpu_deps.sh and carry it): .deps/include/xxhash.h and the pybind11 package in
# .deps/pybind11. GoogleTest is optional (CMake skips the C++ tests without it); so is the Python
# module (the build falls back to C++ only when pybind11 or the Python headers are missing).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
OUT=${OUT:-$root/gpu_out}
export OUT  # bench/gpu.py writes $OUT/gpu_bench.json
mkdir -p "$OUT"
BUDGET=${FLOW_GPU_BUDGET_S:-470}
JOBS=${FLOW_GPU_JOBS:-$(nproc 2>/dev/null || echo 4)}
BUILD="$root/build-gpu-check"
T0=$(date +%s)
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
STEPS_JSON=()
FAILED=0

elapsed() { echo $(( $(date +%s) - T0 )); }
remaining() { echo $(( BUDGET - $(elapsed) )); }

# record NAME STATUS RC SECONDS NOTE
record() {
  printf '%-18s %-8s rc=%-4s %4ss  %s\n' "$1" "$2" "$3" "$4" "$5" | tee -a "$SUMMARY"
  local note
  note=$(printf '%s' "$5" | tr '\000-\037' ' ')
  note=${note//\\/\\\\}
  note=${note//\"/\\\"}
  STEPS_JSON+=("{\"step\": \"$1\", \"status\": \"$2\", \"rc\": $3, \"seconds\": $4, \"note\": \"$note\"}")
  if [ "$2" = "FAIL" ] || [ "$2" = "TIMEOUT" ]; then FAILED=1; fi
}

# step NAME LIMIT_S COMMAND...: runs COMMAND under timeout (clamped to the budget left), output to
# $OUT/NAME.log. Returns the command's status (124 on timeout, 125 when skipped).
step() {
  local name=$1 limit=$2
  shift 2
  local left
  left=$(remaining)
  if [ "$left" -lt "$limit" ]; then limit=$left; fi
  if [ "$limit" -lt 10 ]; then
    record "$name" SKIPPED 125 0 "budget spent"
    return 125
  fi
  echo "[gpu_check] $(elapsed)s: $name (limit ${limit}s): $*"
  local s0 rc
  s0=$(date +%s)
  timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  local dt=$(( $(date +%s) - s0 ))
  if [ $rc -eq 0 ]; then
    record "$name" PASS 0 "$dt" ""
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    record "$name" TIMEOUT "$rc" "$dt" "killed after ${limit}s; see $name.log"
  else
    record "$name" FAIL "$rc" "$dt" "see $name.log: $(tail -n 3 "$OUT/$name.log" | tr '\n' ' ' | cut -c1-300)"
  fi
  return $rc
}

# ---- environment ------------------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -a)"
  echo "cores: $JOBS"
  command -v nvidia-smi > /dev/null && timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  command -v nvcc > /dev/null && nvcc --version | tail -n 2
  echo "cmake: $(cmake --version | head -n 1)"
  echo "g++: $(g++ --version | head -n 1)"
  echo "python3: $(command -v python3) $(python3 --version 2>&1)"
  timeout 60 python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1
  ls /usr/include/gtest/gtest.h 2>/dev/null || echo "gtest: not in /usr/include"
} > "$OUT/env.log" 2>&1
cat "$OUT/env.log"

# ---- configure --------------------------------------------------------------------------------
PY=$(command -v python3)
# cuDNN and cuBLASLt may exist only inside torch's pip packages (nvidia/*/lib): the C++ test binaries
# find them through FLOW_CUDA_LIB_PATH (runtime/dynlib.h); Python processes that import torch first
# have them loaded already.
if [ -z "${FLOW_CUDA_LIB_PATH:-}" ]; then
  FLOW_CUDA_LIB_PATH=$(timeout 60 "$PY" -c 'import glob, os, nvidia
print(":".join(d for p in nvidia.__path__ for d in sorted(glob.glob(os.path.join(p, "*", "lib")))))' 2>/dev/null)
  export FLOW_CUDA_LIB_PATH
fi
echo "FLOW_CUDA_LIB_PATH=${FLOW_CUDA_LIB_PATH:-}" >> "$OUT/env.log"
# How the GPU machine configures flow (no LLVM; the module's libstdc++ static and hidden).
# shellcheck source=tools/gpu_cmake_args.sh
source "$root/tools/gpu_cmake_args.sh"
gpu_cmake_args "$root" "$BUILD" "$PY"
have_pybind=0
if PYTHONPATH="$root/.deps${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m pybind11 --cmakedir > /dev/null 2>&1; then have_pybind=1; fi
python_module=OFF
if [ $have_pybind -eq 1 ]; then
  if PYTHONPATH="$root/.deps${PYTHONPATH:+:$PYTHONPATH}" step configure 90 cmake "${cmake_args[@]}" -DFLOW_BUILD_PYTHON=ON; then
    python_module=ON
  else
    rm -f "$BUILD/CMakeCache.txt"
    step configure-cpp 60 cmake "${cmake_args[@]}" -DFLOW_BUILD_PYTHON=OFF
  fi
else
  echo "[gpu_check] pybind11 not found (also not in .deps): building C++ only"
  step configure 60 cmake "${cmake_args[@]}" -DFLOW_BUILD_PYTHON=OFF
fi
have_gtest=0
grep -q "GoogleTest not found" "$OUT"/configure*.log 2>/dev/null || have_gtest=1

# ---- build: the CUDA runtime test first (so a slow full build still leaves a verdict) ------------
export FLOW_CACHE_DIR="$BUILD/kernel-cache"
if [ -f "$BUILD/CMakeCache.txt" ]; then
  if [ $have_gtest -eq 1 ]; then
    PYTHONPATH="$root/.deps${PYTHONPATH:+:$PYTHONPATH}" step build-cuda-test 240 \
      cmake --build "$BUILD" -j "$JOBS" --target test_cuda_runtime test_cuda_libs test_cudnn
  fi
  keep_going=(-k)
  grep -q "CMAKE_GENERATOR:INTERNAL=Ninja" "$BUILD/CMakeCache.txt" && keep_going=(-k 0)
  # PYTHONPATH: a build may re-run the configure step (new files), which looks for pybind11 again.
  PYTHONPATH="$root/.deps${PYTHONPATH:+:$PYTHONPATH}" step build 240 \
    cmake --build "$BUILD" -j "$JOBS" -- "${keep_going[@]}"
fi

# ---- C++ tests ----------------------------------------------------------------------------------
if [ -x "$BUILD/tests/cpp/test_cuda_runtime" ]; then
  FLOW_CUDA_SYNC=1 step test-cuda-runtime 90 "$BUILD/tests/cpp/test_cuda_runtime" \
    --gtest_output=json:"$OUT/test_cuda_runtime.json"
  # A skip here means the GPU machine has no usable device: say so loudly.
  if grep -q "no CUDA device" "$OUT/test-cuda-runtime.log"; then
    record cuda-device FAIL 1 0 "tests skipped: no CUDA device ($(grep -m1 -A1 'no CUDA device' "$OUT/test-cuda-runtime.log" | tr '\n' ' ' | cut -c1-200))"
  fi
fi
if [ -x "$BUILD/tests/cpp/test_cuda_libs" ]; then
  FLOW_CUDA_SYNC=1 step test-cuda-libs 90 "$BUILD/tests/cpp/test_cuda_libs" \
    --gtest_output=json:"$OUT/test_cuda_libs.json"
fi
if [ -x "$BUILD/tests/cpp/test_cudnn" ]; then
  FLOW_CUDA_SYNC=1 step test-cudnn 90 "$BUILD/tests/cpp/test_cudnn" --gtest_output=json:"$OUT/test_cudnn.json"
fi

# ---- Python -------------------------------------------------------------------------------------
# Python processes get a traceback on a crash (faulthandler): the last run of the module on a GPU
# host crashed inside it (SIGSEGV in libstdc++'s number formatting, 2026-11-30).
export PYTHONFAULTHANDLER=1
# Smoke test of the module in three import orders, each in its own process: alone, after torch (what
# the tests do) and before torch. Its log says which crash, and when only "flow before torch" works
# the Python steps below import flow first (PRELOAD), so the rest of the run still measures.
PY_M=("$PY" -m)  # runs a module: "${PY_M[@]}" pytest ...
PY_S=("$PY")     # runs a script
if [ "$python_module" = ON ] && ls "$root"/python/flow/_C*.so > /dev/null 2>&1; then
  # (The GPU build has no CPU code generator: nothing below computes on the CPU. repr formats
  # numbers through std::ostream, where the 2026-11-30 crash was.)
  smoke='import flow, sys
x = flow.ones(3)
print("cpu:", repr(x), repr(flow._C.Tensor.empty([3])), flush=True)
if flow.cuda.is_available():
    y = (flow.ones(3).cuda() * 2).cpu()
    print("cuda:", repr(y), flow.cuda.get_device_name(), flow.cuda.memory_stats()["allocated_bytes.all.current"], flush=True)
else:
    print("cuda: unavailable:", flow.cuda.unavailable_reason(), flush=True)'
  smoke_rc() {  # smoke_rc LABEL PRELUDE: runs the smoke script after PRELUDE, prints and returns rc
    local rc
    { echo "--- $1"; PYTHONPATH="$root/python" timeout 120 "$PY" -c "$2
$smoke"; } >> "$OUT/python-smoke.log" 2>&1
    rc=$?
    echo "--- $1: rc=$rc" >> "$OUT/python-smoke.log"
    return $rc
  }
  : > "$OUT/python-smoke.log"
  ldd "$root"/python/flow/_C*.so >> "$OUT/python-smoke.log" 2>&1
  smoke_rc "flow alone" ""; rc_alone=$?
  smoke_rc "torch, then flow" "import torch"; rc_after=$?
  smoke_rc "flow, then torch" "import flow
import torch"; rc_before=$?
  # What the Python executable exports of libstdc++ (a second copy there would interpose on the
  # module's: the suspected cause of the 2026-11-30 crash).
  { echo "--- python executable: $(readlink -f "$PY")";
    echo "libstdc++ symbols it exports: $(nm -D --defined-only "$(readlink -f "$PY")" 2>/dev/null | grep -c ' _ZNS')";
    echo "libstdc++ symbols the module imports: $(nm -D --undefined-only "$root"/python/flow/_C*.so 2>/dev/null | grep -c ' _ZNS')"; } \
    >> "$OUT/python-smoke.log" 2>&1
  if [ $rc_alone -eq 0 ] && [ $rc_after -eq 0 ] && [ $rc_before -eq 0 ]; then
    record python-smoke PASS 0 0 ""
  else
    # A native backtrace of the crash, and which object each libstdc++ locale symbol bound to.
    if command -v gdb > /dev/null; then
      PYTHONPATH="$root/python" timeout 120 gdb -batch -ex run -ex bt -ex "info sharedlibrary" \
        --args "$PY" -c "$smoke" > "$OUT/python-smoke-gdb.log" 2>&1
    fi
    PYTHONPATH="$root/python" LD_DEBUG=bindings timeout 120 "$PY" -c "$smoke" 2>&1 |
      grep -E "locale|num_put|numpunct|ctype|ios_base" | head -200 > "$OUT/python-smoke-bindings.log"
    record python-smoke FAIL 1 0 "rc alone=$rc_alone torch-first=$rc_after flow-first=$rc_before; see python-smoke.log"
    if [ $rc_after -ne 0 ] && [ $rc_before -eq 0 ]; then
      PY_M=("$PY" -c 'import flow, sys, runpy; sys.argv = sys.argv[1:]; runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)')
      PY_S=("$PY" -c 'import flow, sys, runpy; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name="__main__")')
      echo "[gpu_check] only 'flow, then torch' works: the Python steps import flow first" | tee -a "$SUMMARY"
    fi
  fi
fi
# Order: the model and library tests (test_gpu.py), then the benchmark (the only source of GPU
# figures), then the per-op sweeps and the other GPU-marked tests (test_gpu_ops.py, sorting, in-place
# writes, math, runtime API: ~1350 tests on the emulated device, many small NVRTC compiles on a cold
# cache; given 120 s, taken from the CPU-path ctest step after it, which CI runs anyway).
# -v: one line per test as it finishes, so a step killed at its limit still shows how far it got;
# -rfEP: the failures, and what passing tests printed (which path the library calls took).
# With pytest-xdist (the GPU image has it) the tests run in FLOW_GPU_PYTEST_WORKERS processes (default:
# half the cores, at most 8) sharing the device and the kernel cache (written atomically): a cold run
# is bound by NVRTC compiles, which are CPU work. Not when the module must be imported first (PRELOAD
# above): xdist's workers would not be.
PYTEST_PAR=()
if [ "${#PY_M[@]}" -eq 2 ] && timeout 60 "$PY" -c 'import xdist' > /dev/null 2>&1; then
  workers=${FLOW_GPU_PYTEST_WORKERS:-$(( JOBS / 2 > 8 ? 8 : JOBS / 2 ))}
  [ "$workers" -ge 2 ] && PYTEST_PAR=(-n "$workers")
fi
echo "[gpu_check] pytest workers: ${PYTEST_PAR[*]:-one process}" | tee -a "$SUMMARY"
pytest_gpu() {  # pytest_gpu STEP LIMIT FILE...
  local name=$1 limit=$2
  shift 2
  PYTHONPATH="$root/python" step "$name" "$limit" "${PY_M[@]}" pytest -m gpu ${PYTEST_PAR[@]+"${PYTEST_PAR[@]}"} "$@" \
    -v -rfEP --tb=short -p no:cacheprovider --junitxml="$OUT/${name//-/_}.xml"
  local rc=$?
  if [ $rc -eq 5 ]; then echo "[gpu_check] $name: no test is marked gpu (exit 5)" | tee -a "$SUMMARY"; fi
}
have_module=0
[ "$python_module" = ON ] && ls "$root"/python/flow/_C*.so > /dev/null 2>&1 && have_module=1
if [ -f "$root/tests/python/test_gpu.py" ]; then
  if [ $have_module -eq 1 ]; then
    pytest_gpu pytest-gpu 130 "$root/tests/python/test_gpu.py"
  else
    record pytest-gpu SKIPPED 125 0 "the Python module was not built"
  fi
fi

if [ -f "$root/bench/gpu.py" ]; then
  if [ $have_module -eq 1 ]; then
    PYTHONPATH="$root/python:$root/bench" step bench-gpu 180 "${PY_S[@]}" "$root/bench/gpu.py"
  else
    record bench-gpu SKIPPED 125 0 "the Python module was not built"
  fi
fi

if [ -d "$root/tests/python" ]; then
  if [ $have_module -eq 1 ]; then
    pytest_gpu pytest-gpu-ops 120 "$root/tests/python" --ignore "$root/tests/python/test_gpu.py"
  else
    record pytest-gpu-ops SKIPPED 125 0 "the Python module was not built"
  fi
fi

# The rest of the C++ suite (CPU paths; the GPU-specific binaries ran first), after the GPU steps so
# that a tight budget spends itself on what only this machine can check.
if [ -f "$BUILD/CTestTestfile.cmake" ] || [ -f "$BUILD/tests/cpp/CTestTestfile.cmake" ]; then
  # test_cuda_runtime, test_cuda_libs and test_cudnn already ran above, with their own logs and
  # JSON. The SIMT emulator's own suites (the CUDA text run on the host: test_simt_emulator,
  # test_cuda_plan_kernels, test_cuda_search_space) use no device and ran in CI: not worth device
  # time here.
  step ctest 150 ctest --test-dir "$BUILD" --output-on-failure --timeout 120 -j 4 \
    -E '^test_cuda_(runtime|libs|plan_kernels|search_space)$|^test_cudnn$|^test_simt_emulator$'
fi

# Autotuning on the device (default vs tuned Params of the three kernels; device-event timing).
if [ -f "$root/bench/autotune.py" ] && [ "$python_module" = ON ]; then
  PYTHONPATH="$root/python:$root/bench" step bench-autotune-gpu 90 "${PY_S[@]}" "$root/bench/autotune.py" \
    --device cuda --micro-only --micro-budget 15 --repeats 5
fi

# ---- summary ------------------------------------------------------------------------------------
total=$(elapsed)
{
  echo "{"
  echo "  \"total_seconds\": $total,"
  echo "  \"budget_seconds\": $BUDGET,"
  echo "  \"ok\": $([ $FAILED -eq 0 ] && echo true || echo false),"
  echo "  \"steps\": ["
  n=${#STEPS_JSON[@]}
  for i in "${!STEPS_JSON[@]}"; do
    sep=","
    [ "$i" -eq $((n - 1)) ] && sep=""
    echo "    ${STEPS_JSON[$i]}$sep"
  done
  echo "  ]"
  echo "}"
} > "$OUT/summary.json"
# Compact copies of the failing C++ test output, for a quick read.
for log in "$OUT"/test-cuda-runtime.log "$OUT"/test-cuda-libs.log "$OUT"/test-cudnn.log "$OUT"/ctest.log; do
  [ -f "$log" ] && grep -E "^\[  FAILED  \]|Failure|error:|Skipped|no CUDA device" "$log" | head -n 40 > "${log%.log}.failures.txt"
done
echo
echo "==================== gpu_check summary (${total}s of ${BUDGET}s) ===================="
cat "$SUMMARY"
echo "logs and JSON: $OUT"
[ $FAILED -eq 0 ] && echo "RESULT: PASS" || echo "RESULT: FAIL"
exit $FAILED

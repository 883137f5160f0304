#!/usr/bin/env bash
# Fills .deps/ with what the GPU machine may lack (it has no internet and no apt): the xxHash
# header (.deps/include/xxhash.h, from /usr/include), the cuDNN headers (.deps/include/cudnn*.h,
# from the directory holding cudnn.h: $FLOW_CUDNN_SRC, else the CUDA toolkit's include directory;
# the GPU machine has libcudnn.so.9 in PyTorch's pip packages but maybe no headers) and the pybind11
# Python package (.deps/pybind11, from the project venv or python3). tools/gpu_check.sh and the
# CMake configuration look there. .deps/ is git-ignored: carry it to the GPU machine explicitly
# (carry: [".deps"]).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
mkdir -p "$deps/include"

xx_dir=${FLOW_XXHASH_SRC:-/usr/include}
if [ ! -f "$xx_dir/xxhash.h" ]; then
  echo "[flow] prepare_gpu_deps: $xx_dir/xxhash.h not found (install libxxhash-dev or set FLOW_XXHASH_SRC)" >&2
  exit 1
fi
cp "$xx_dir/xxhash.h" "$deps/include/"
[ -f "$xx_dir/xxh3.h" ] && cp "$xx_dir/xxh3.h" "$deps/include/"

# cuDNN headers: cudnn.h includes its siblings (cudnn_version.h, cudnn_graph.h, cudnn_ops.h, ...), so
# all of cudnn*.h from one directory go together. Without them flow still builds (GPU convolutions
# then throw "built without cuDNN headers"), so a missing cudnn.h is a warning.
cudnn_src=""
for d in ${FLOW_CUDNN_SRC:-} ${CUDA_HOME:+$CUDA_HOME/include} /usr/local/cuda/include /usr/include \
  /usr/include/x86_64-linux-gnu; do
  if [ -f "$d/cudnn.h" ]; then cudnn_src=$d; break; fi
done
cudnn_note="no cudnn.h"
if [ -n "$cudnn_src" ]; then
  rm -f "$deps"/include/cudnn*.h
  cp "$cudnn_src"/cudnn*.h "$deps/include/"
  cudnn_note="cudnn*.h from $cudnn_src"
else
  echo "[flow] prepare_gpu_deps: warning: cudnn.h not found (set FLOW_CUDNN_SRC to its directory);" \
    "the GPU build will have no cuDNN convolutions" >&2
fi

py=${PYTHON:-}
if [ -z "$py" ]; then
  if [ -x "$root/.venv/bin/python" ]; then py="$root/.venv/bin/python"; else py=python3; fi
fi
pb_dir=$("$py" -c 'import os, pybind11; print(os.path.dirname(pybind11.__file__))' 2>/dev/null) || {
  echo "[flow] prepare_gpu_deps: pybind11 is not importable by $py" >&2
  exit 1
}
rm -rf "$deps/pybind11"
cp -r "$pb_dir" "$deps/pybind11"
find "$deps/pybind11" -name __pycache__ -type d -prune -exec rm -rf {} +
# Smoke check: the copy alone answers --cmakedir.
cmakedir=$(cd /tmp && PYTHONPATH="$deps" "$py" -m pybind11 --cmakedir)
case "$cmakedir" in
  "$deps"/pybind11/*) ;;
  *) echo "[flow] prepare_gpu_deps: PYTHONPATH=.deps resolves pybind11 to $cmakedir, not .deps" >&2; exit 1 ;;
esac
echo "[flow] .deps ready: $(du -sh "$deps" | cut -f1) (xxhash.h, $cudnn_note, pybind11 $("$py" -c 'import pybind11; print(pybind11.__version__)'))"

# Sourced by tools/gpu_check.sh (on the GPU machine) and tools/gpu_rehearsal.sh (its rehearsal here):
# the one definition of how the GPU machine configures flow. gpu_cmake_args ROOT BUILD PYTHON fills the
# array cmake_args: no LLVM (the GPU machine has none: CPU kernels run on the reference interpreter),
# no emulated device, and the Python module with its libstdc++ linked statically and hidden: in the GPU
# host's Python process a dynamically linked _C crashed in std::ostream number formatting (a libstdc++
# clash) while the C++ test binaries ran fine (2026-11-30). DEPS_ROOT (default ROOT) holds .deps/.
gpu_cmake_args() {
  local root=$1 build=$2 py=$3 deps_root=${4:-$1}
  cmake_args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLOW_WITH_LLVM=OFF -DFLOW_WERROR=OFF
              -DFLOW_BUILD_EMULATED_DEVICE=OFF
              -DPython_EXECUTABLE="$py"
              "-DCMAKE_MODULE_LINKER_FLAGS=-static-libstdc++ -static-libgcc -Wl,--exclude-libs,ALL")
  if [ -f "$deps_root/.deps/include/xxhash.h" ] && [ ! -f /usr/include/xxhash.h ]; then
    cmake_args+=(-DFLOW_XXHASH_INCLUDE_DIR="$deps_root/.deps/include")
  fi
}

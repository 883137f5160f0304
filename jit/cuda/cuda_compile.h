// Note: CUDA compilation = print (cuda_printer.h) + NVRTC (runtime/nvrtc.h) with the embedded
// device helpers handed over as in-memory headers, so nothing but libnvrtc is needed at run time.
// Options (cuda_compile_options): C++17 and IEEE-accurate math, spelled out explicitly so the
// compiler identity says what was used:
//   -std=c++17 --fmad=true --ftz=false --prec-div=true --prec-sqrt=true
// --use_fast_math is never set (it would turn expf into ex2.approx, flush denormals and break
// parity with the CPU backend); fused multiply-add stays on, as in nvcc's and PyTorch's defaults.
// -default-device is not used: the helpers mark every function __device__ themselves, and a
// missing annotation should be a compile error, not a silent device function.
#pragma once
#include <string>
#include <vector>

#include "dsl/stmt.h"
#include "jit/cuda/cuda_printer.h"

namespace flow::jit::cuda {

struct CudaCompiled {
  CudaSource kernel;  // name, source, launch shape, static shared bytes
  std::string arch;   // "sm_90"
  std::string ptx;
  std::string cubin;  // empty for a virtual architecture ("compute_90")
  std::string log;    // NVRTC warnings, usually empty
};

// The NVRTC options every kernel is compiled with (after the architecture flag).
const std::vector<std::string>& cuda_compile_options();

// Prints `f` and compiles it for `arch` ("sm_90", "sm_80", or "compute_90" for PTX only).
// Throws std::invalid_argument when `f` cannot be printed (see print_cuda_source) and
// runtime::NvrtcError when NVRTC rejects the source: its what() names the kernel and arch and holds
// the NVRTC log and the path of the saved source (also in log() / source_path()).
CudaCompiled cuda_compile(const dsl::LoweredFunc& f, const std::string& arch);

// Compiles a hand-written or previously printed kernel source the same way (the helpers are
// available as #include "flow_helpers.cuh"). `name` is the entry point; launch fields stay unset.
CudaCompiled cuda_compile_source(const std::string& name, const std::string& source, const std::string& arch);

// Identity of the CUDA compiler for the kernel cache key:
// "nvrtc-13.0;-std=c++17 --fmad=true ...;helpers-xxh3=<32 hex digits>" (the helpers' contents are
// part of every binary, so a change to them must change the key). Throws std::runtime_error if
// NVRTC cannot be loaded.
std::string cuda_compiler_id();

}  // namespace flow::jit::cuda

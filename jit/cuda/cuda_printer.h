// Note: the CUDA C++ printer. A dsl::LoweredFunc with Target::CUDA becomes one
// `extern "C" __global__` kernel that #includes "flow_helpers.cuh" (the embedded device helpers,
// see embedded_helpers.h). The printer makes no scheduling decisions: it prints the loop nest it is
// given (docs/loop-nests.md), with two exceptions that only change how memory is accessed:
//  - a `vectorized` loop over v in [0, W) becomes one flow::Vec<T, W> load per distinct
//    (buffer, base) that the body reads at `base + v`, per-lane code in a `#pragma unroll` loop,
//    and one vector store per buffer the body writes at `base + v` (the scheduler guarantees
//    alignment when it emits such a loop; accesses that do not fit stay scalar);
//  - BlockReduce calls flow::block_reduce_* with one per-kernel __shared__ scratch array.
//
// Kernel ABI (what a launcher passes, in LoweredFunc::params order): a buffer is its device
// pointer; a scalar is the 8-byte dsl::ArgValue slot it lives in, i.e. an integer or bool scalar is
// an int64_t parameter and a floating scalar a double parameter (narrowed inside the kernel). So a
// launcher may pass `&args[i]` of an ArgValue array for every parameter. Buffers are __restrict__:
// the caller must not pass aliasing buffers.
#pragma once
#include <cstdint>
#include <string>

#include "dsl/stmt.h"

namespace flow::jit::cuda {

// A kernel whose body checks indices (dsl CheckIndex) takes one parameter after f.params, named
// this: the device's error word (runtime/device_error.h), which its reports claim.
inline constexpr const char* kErrorWordParam = "flow_err";

// A printed kernel and the launch shape it expects.
struct CudaSource {
  std::string name;    // the extern "C" entry point (the LoweredFunc name, sanitized)
  std::string source;  // CUDA C++; #includes "flow_helpers.cuh"
  // Launch shape (x, y, z) as expressions over the scalar params, copied from the LoweredFunc; an
  // undefined dimension of the LoweredFunc is 1 here.
  dsl::Expr grid[3];
  dsl::Expr block[3];
  int64_t block_threads = 0;  // product of the block dims when all are constant, else 0
  int64_t shared_bytes = 0;   // static __shared__ bytes: Shared allocations + reduction scratch
};

// Prints `f`. Throws std::invalid_argument (message naming the kernel and the offending node) for
// what a GPU kernel cannot express: a CPU target, a Parallel loop, a GPU loop whose extent is not
// the launch dimension, a collective under a loop or an if, arithmetic on a half type, a store to
// an input buffer, an unknown buffer.
CudaSource print_cuda_source(const dsl::LoweredFunc& f);

// print_cuda_source(f).source
std::string print_cuda(const dsl::LoweredFunc& f);

// The CUDA spelling of a dtype: "float", "int64_t", "flow::half", "flow::bfloat16", ...
const char* cuda_type_name(dsl::DType t);

}  // namespace flow::jit::cuda

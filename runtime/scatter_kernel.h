// Note: the GPU scatter (dsl/ops/scatter.cpp), one of the runtime's fixed CUDA C++ sources
// (runtime/fixed_kernel.h: compiled by NVRTC once per architecture on first use). The caller has
// copied self into `out`; the kernels combine src into it where index points.
//
// Two ways to run it, chosen by the number of lines (positions of the index apart from `dim`):
//  - lines >= kScatterLinesPath: one thread per line, walking `dim` in order. Two lines never
//    write the same element (they differ in a coordinate other than `dim`), so the stores need no
//    atomics and the result is the CPU's exactly: duplicates apply in order, the last store wins,
//    sums round in the same order.
//  - fewer lines (a 1-D scatter, a histogram): one thread per index position, combining with an
//    atomicCAS loop on the 4- or 8-byte word that holds the element (the byte's word for bool).
//    Duplicates then meet in an unspecified order, as in torch's CUDA kernels: a float sum may
//    round differently from the CPU's, and for reduce "none" any one of the duplicates is stored.
// include_self=false first stores the reduction's identity at every targeted element (a separate
// launch on the positions path; a first pass of the same thread on the lines path).
// An index outside [0, out.size(dim)) is skipped and reported into the device's error word
// (runtime/device_error.h: torch's "index out of bounds" message at the next synchronization; the CPU
// path raises at the call).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda_driver.h"
#include "runtime/fixed_kernel.h"

namespace flow::runtime::cuda {

enum class ScatterReduce { None = 0, Sum = 1, Prod = 2, Amax = 3, Amin = 4 };

inline constexpr int kScatterMaxRank = 8;
inline constexpr int64_t kScatterLinesPath = 8192;

// The index's shape (row-major; a 0-dim index as [1]), the contiguous strides of src and of the
// output (in elements; src may be larger than the index in every dim, the output apart from dim).
struct ScatterShape {
  int rank = 0, dim = 0;
  int64_t sizes[kScatterMaxRank] = {};
  int64_t src_strides[kScatterMaxRank] = {};
  int64_t out_strides[kScatterMaxRank] = {};
  int64_t out_dim_size = 0;
  ScatterReduce reduce = ScatterReduce::None;
  bool include_self = true;
};

enum class ScatterPath { Auto, Lines, Positions };

struct ScatterLaunch {
  std::string entry;  // flow_scatter_{lines,positions,reset}_<type>
  unsigned blocks = 0, threads = 0;
};

// The launches, in order (the tests run the same plan on the SIMT emulator). Throws
// std::invalid_argument for a rank above kScatterMaxRank.
std::vector<ScatterLaunch> plan_scatter(FixedKernelType type, const ScatterShape& shape,
                                        ScatterPath path = ScatterPath::Auto);

const std::string& scatter_kernel_source();

// The kernel parameter block (what every entry takes after its three pointers).
struct ScatterParams {
  long long rank, dim, count, lines, n, inner, out_dim_size, reduce, include_self;
  long long sizes[kScatterMaxRank], src_strides[kScatterMaxRank], out_strides[kScatterMaxRank];
};
ScatterParams scatter_params(const ScatterShape& shape);

// Runs the plan on `stream` of the current device: out (the output's dtype, already holding self),
// index (int64, contiguous, the index's shape), src (contiguous, src's shape).
void scatter(FixedKernelType type, void* out, const int64_t* index, const void* src, const ScatterShape& shape,
             Stream stream, ScatterPath path = ScatterPath::Auto);

}  // namespace flow::runtime::cuda

// Note: the GPU embedding_bag (dsl/ops/embedding_bag.cpp), one of the runtime's fixed CUDA C++
// sources (runtime/fixed_kernel.h: compiled by NVRTC once per architecture on first use).
//
// One block per bag (grid-stride over the bags), its threads across the embedding dimension: each
// thread walks the bag's positions in order and combines its columns of the named rows, so a
// warp reads 32 consecutive elements of a row (coalesced), every thread reads the same index (one
// transaction, broadcast), and no two threads write one element: no atomics, and the result is the
// serial one: the CPU's order, so unweighted float32 and float64 sums agree bit for bit (with
// per-sample weights NVRTC may fuse the multiply-add, a rounding the CPU loop may not make).
// Half-precision rows accumulate in float32 and round once.
//
// A kernel cannot raise: the bag boundaries are clamped to [0, positions] and non-decreasing, and
// an index outside [0, rows) is skipped like padding_idx; each is also reported in the device's
// error word (runtime/device_error.h), which the host's next synchronize or copy to the host turns
// into torch's message (the CPU executor raises at once).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda_driver.h"
#include "runtime/fixed_kernel.h"

namespace flow::runtime::cuda {

enum class EmbeddingBagMode { Sum = 0, Mean = 1, Max = 2 };

struct EmbeddingBagShape {
  int64_t bags = 0, dim = 0, positions = 0, rows = 0;
  int64_t padding_idx = -1;  // -1: none
  EmbeddingBagMode mode = EmbeddingBagMode::Sum;
  bool per_sample_weights = false;
};

// The kernel parameter block (what every entry takes after its five pointers).
struct EmbeddingBagParams {
  long long bags, dim, positions, rows, padding_idx, mode, per_sample_weights;
};
// The kernel source declares the same seven 8-byte fields (flow_embedding_bag_params).
static_assert(sizeof(EmbeddingBagParams) == 7 * 8, "EmbeddingBagParams must match the kernel's struct");
EmbeddingBagParams embedding_bag_params(const EmbeddingBagShape& shape);

struct EmbeddingBagLaunch {
  std::string entry;  // flow_embedding_bag_<type>
  unsigned blocks = 0, threads = 0;
};
// The launch (none for an empty output). Float32, Float64, Float16 and BFloat16 only: throws
// std::invalid_argument for other types.
std::vector<EmbeddingBagLaunch> plan_embedding_bag(FixedKernelType type, const EmbeddingBagShape& shape);

const std::string& embedding_bag_kernel_source();

// Runs on `stream` of the current device: out [bags, dim] and weight [rows, dim] contiguous, of
// `type`; indices [positions] and offsets [bags + 1] contiguous int64; per_sample_weights
// [positions] of `type` (read only when shape.per_sample_weights). Every entry takes, after the
// parameter block, the error word (long long*, may be null).
void embedding_bag(FixedKernelType type, void* out, const int64_t* indices, const void* weight, const int64_t* offsets,
                   const void* per_sample_weights, const EmbeddingBagShape& shape, Stream stream);

}  // namespace flow::runtime::cuda

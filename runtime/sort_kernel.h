// Note: the GPU sort of argsort (dsl/ops/sort.cpp): the positions of each line in sorted order, by
// a bitonic sort, one of the runtime's fixed CUDA C++ sources (runtime/fixed_kernel.h: compiled by
// NVRTC once per architecture on first use).
//
// The lines are padded to P = the next power of two; a padded position sorts after every real one.
// The order compares (value, position), NaN above every number, so it is total and the result is
// that of a stable sort (dsl/ops/sort.cpp says why).
//  - A line of up to kSortTile (2048) elements is sorted by one block in shared memory: values and
//    positions are loaded once, the log2(P) (log2(P) + 1) / 2 compare-exchange steps run between
//    barriers, and the first k positions are written as int64. One launch.
//  - A longer line sorts its tiles that way into a scratch array of int32 positions (the values
//    are read through them), then each merge level k > kSortTile runs its exchange distances
//    j >= kSortTile as one launch each over global memory, and the distances below in one block
//    launch per tile: about log2(P / kSortTile)^2 / 2 launches in all.
// Bitonic sorting does n log^2 n comparisons, not n log n, but each step is data-independent and
// parallel; for the lengths models sort (class scores, a few thousand logits) it is one launch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda_driver.h"
#include "runtime/fixed_kernel.h"

namespace flow::runtime::cuda {

// The element types a sort reads.
using SortKeyType = FixedKernelType;

inline constexpr int64_t kSortTile = 2048;

// `outer` x `len` x `inner` contiguous elements; line (o, i) is x[(o * len + p) * inner + i] for
// p < len; out gets the first `k` positions of each line in the same layout ([outer, k, inner]).
struct SortShape {
  int64_t outer = 0, len = 0, inner = 0, k = 0;
  bool descending = false;
};

const std::string& sort_kernel_source();

// One launch of the sort, as planned on the host (the tests run the same plan on the SIMT
// emulator). Entry "flow_sort_block_<type>" sorts tiles in shared memory for merge levels
// [k_begin, k_end], exchange distances from min(level, tile) / 2 down; "flow_sort_step_<type>"
// does one exchange distance `j` of level `k_begin` over global memory.
struct SortLaunch {
  std::string entry;
  unsigned blocks = 0, threads = 0;
  int first = 0, last = 0;  // block: read x (else the scratch); write out (else the scratch)
  long long k_begin = 0, k_end = 0, j = 0;
};
struct SortPlan {
  long long padded = 0;            // P
  long long scratch_elements = 0;  // int32 positions the caller provides (0: none needed)
  std::vector<SortLaunch> launches;
};
SortPlan plan_sort(SortKeyType type, const SortShape& shape, int sm_count);

// Sorts on `stream` of the current device; `scratch` holds plan_sort(...).scratch_elements int32s
// (may be null when that is 0). Throws std::invalid_argument for a line of 2^31 elements or more.
void argsort_lines(SortKeyType type, const void* x, int64_t* out, int32_t* scratch, const SortShape& shape,
                   Stream stream);

}  // namespace flow::runtime::cuda

// Note: the executor of argsort library steps (dsl/ops/sort.cpp), for both targets: the input made
// contiguous (a copy only when it is not), its lines addressed as [outer, len, inner] around the
// sorted dim, and the first k positions of each line written as int64 in the output's layout.
//  - CPU: lines in parallel (runtime/parallel.h). Each value becomes an unsigned key whose order is
//    the op's (IEEE bits made monotonic, -0 as +0, NaN above +inf; descending inverts the key), so
//    a line's (key, position) pairs sort with integer compares: an LSD radix sort (stable, O(n) per
//    key byte) for whole lines; for k under 1/16 of the line (topk), one pass keeping the best k in
//    a sorted buffer (k <= 64) or std::partial_sort on (key, position). Halves sort by their
//    float32 values, bool as 0/1.
//  - CUDA: the bitonic sort kernel of runtime/sort_kernel.h on the current stream, its int32
//    scratch (long lines only) a device tensor held until the launches are enqueued.
#pragma once
#include <vector>

#include "jit/library_ops.h"
#include "jit/tensor.h"

namespace flow::jit {

void run_sort_step(const LibraryStep& step, const std::vector<const Tensor*>& values);

}  // namespace flow::jit

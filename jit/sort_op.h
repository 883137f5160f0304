// Note: the executor of argsort library steps (dsl/ops/sort.cpp), for both targets: the input made
// contiguous (a copy only when it is not), its lines addressed as [outer, len, inner] around the
// sorted dim, and the first k positions of each line written as int64 in the output's layout.
//  - CPU: lines in parallel (runtime/parallel.h); each line's (value, position) pairs sorted with
//    std::sort, or std::partial_sort for the first k < len, under the total order of
//    dsl/ops/sort.cpp (so no stable sort is needed). Halves compare as float32, ints as int64.
//  - CUDA: the bitonic sort kernel of runtime/sort_kernel.h on the current stream, its int32
//    scratch (long lines only) a device tensor held until the launches are enqueued.
#pragma once
#include <vector>

#include "jit/library_ops.h"
#include "jit/tensor.h"

namespace flow::jit {

void run_sort_step(const LibraryStep& step, const std::vector<const Tensor*>& values);

}  // namespace flow::jit

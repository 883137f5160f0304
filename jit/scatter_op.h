// Note: the executor of scatter library steps (dsl/ops/scatter.cpp), for both targets. The output
// (contiguous, self's shape) first receives a copy of self; index and src are made contiguous (a
// copy only when they are not). Then:
//  - CPU: every line (the index's positions that differ only along `dim`) walked in order along
//    `dim`: two lines never write the same element, so no atomics are needed and the result is the
//    serial one (duplicates in order, the last store wins). Lines run in parallel (a 1-d scatter is
//    one line, serial, as in torch). When the index is broadcast over the dims after `dim`
//    (index_add, index_put, embedding_bag: whole rows), the broadcast is not materialized: each
//    position combines a contiguous row (the inner loop vectorizes), and the destination rows are
//    cut into one part per thread, each thread scanning every position and combining the rows of
//    its part (owner computes: no shared writes, each row still in index order, and a row stays in
//    one core's cache). Every index is checked first; one outside [0, self.size(dim)) raises
//    torch's "index 7 is out of bounds for dimension 0 with size 5".
//  - CUDA: the kernels of runtime/scatter_kernel.h on the current stream (out-of-range indices
//    skipped).
#pragma once
#include <vector>

#include "jit/library_ops.h"
#include "jit/tensor.h"

namespace flow::jit {

void run_scatter_step(const LibraryStep& step, const std::vector<const Tensor*>& values);

}  // namespace flow::jit

// Note: the executor of embedding_bag library steps (dsl/ops/embedding_bag.cpp), for both targets.
// Operands are made contiguous (a copy only when they are not).
//  - CPU: the offsets are checked first (torch's messages, dsl/library_reference.h: offsets[0] has
//    to be 0, none greater than the input's length, non-decreasing); then the bags run in
//    parallel, each thread accumulating one bag at a time in a row of float32 (float64 for float64
//    weights) that the inner loop over the embedding dimension vectorizes, and storing it rounded
//    to the weight's dtype. An index outside [0, num_embeddings) stops its thread's range; after
//    the loop the first such position over all threads raises torch's "Index 3 of input takes
//    value 7 which is not in the valid range [0, 6)", the one a serial loop would report.
//  - CUDA: runtime/embedding_bag_kernel.h on the current stream (bounds clamped, bad indices
//    skipped).
#pragma once
#include <vector>

#include "jit/library_ops.h"
#include "jit/tensor.h"

namespace flow::jit {

void run_embedding_bag_step(const LibraryStep& step, const std::vector<const Tensor*>& values);

}  // namespace flow::jit

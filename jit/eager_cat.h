// Note: eager cat is copies, not a kernel. A generated cat kernel chooses its input per element
// (or per task, scheduler/unswitch.h), and its code grows with the number of inputs, so every new
// input count compiled anew: DenseNet-121's 62 concatenations of 2 to 33 inputs cost 12 s of
// compiles on a model's first eager call on the CPU (NVRTC on a GPU is no faster). Here each input
// (made contiguous in the output's dtype first, by the eager cast kernel when it is not already)
// is copied row by row into its slice of the output: on the CPU a memcpy per row spread over the
// thread pool, on a GPU one stream-ordered 2-D copy (cuMemcpy2DAsync) per input.
#pragma once
#include <optional>
#include <vector>

#include "dsl/graph.h"
#include "jit/tensor.h"

namespace flow::jit {

// cat(inputs, dim) by copies when every input is on one device; nullopt otherwise, or for rows
// wider than a 2-D copy's pitch allows (the caller runs the op's kernel). Type and shape checks
// are the op's own (dsl::OpError).
std::optional<Tensor> cat_by_copies(const std::vector<Tensor>& inputs, const dsl::Attrs& attrs);

}  // namespace flow::jit

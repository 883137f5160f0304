// Note: the memory order of an eager elementwise op's output, as torch's TensorIterator chooses it
// (reorder_dimensions): the output keeps its inputs' order of dims in memory rather than being
// contiguous. A channels-last input gives a channels-last result, a transposed matrix a transposed
// one. Two dims are ordered by the first input whose strides tell them apart; a broadcast (stride
// 0) dim abstains; equal strides put the smaller dim inside. An input of lower rank is aligned to
// the output's trailing dims. 0-dim tensors abstain. Flips and clone() keep their input's order as
// well, and constant pads (max pooling's padded taps) channels-last, as torch's.
//
// Why: eager ops returned contiguous NCHW tensors for channels-last inputs, so the next op read
// its input transposed (an eager NHWC max pool: 6.6x torch eager), and code that checks
// `is_contiguous(memory_format=torch.channels_last)` after an op saw something else than in torch.
// @flow.jit keeps its own rule (scheduler/channels_last.h: NHWC regions of 4-D values).
#pragma once
#include <optional>
#include <vector>

#include "dsl/graph.h"
#include "jit/eager.h"
#include "jit/tensor.h"

namespace flow::jit {

// How an eager op runs so that its results keep its inputs' memory order: the arguments as
// permuted views (tensors aligned to the output's rank, dims listed in `order`), the attrs
// remapped to those dims (flip's `dims`, pad's `pads`), and `order`, to view each result back
// with unpermuted_view. nullopt: the op runs as given (a contiguous result).
struct PermutedCall {
  std::vector<EagerArg> args;
  dsl::Attrs attrs;
  std::vector<int> order;  // the output's dims from outermost to innermost in memory
};
std::optional<PermutedCall> permuted_call(const std::string& op, const std::vector<EagerArg>& args,
                                          const dsl::Attrs& attrs);

// A result computed with dims listed in `order`, viewed in the original dim order.
Tensor unpermuted_view(const Tensor& t, const std::vector<int>& order);

}  // namespace flow::jit

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
#include "jit/tensor.h"

namespace flow::jit {

// The output's dims from outermost to innermost in memory, for an op whose output has shape `out`
// and whose tensor inputs are `inputs` (in argument order); nullopt when that is plain row-major
// order (the output is contiguous).
std::optional<std::vector<int>> eager_output_order(const std::vector<const Tensor*>& inputs, const dsl::Shape& out);

// `t` aligned to `rank` dims (leading size-1 dims) and its dims listed in `order`: a view.
Tensor permuted_view(const Tensor& t, size_t rank, const std::vector<int>& order);

// The inverse: a tensor whose dims are `order`'s, viewed in the original dim order.
Tensor unpermuted_view(const Tensor& t, const std::vector<int>& order);

// The attrs of `op` for its input viewed with dims listed in `order` (permuted_view), for the
// injective ops that keep their input's memory order as torch's do: flip's `dims`, and pad's `pads`
// for a channels-last input (torch's constant pad keeps no other order). nullopt otherwise.
std::optional<dsl::Attrs> permuted_dim_attrs(const std::string& op, const dsl::Attrs& attrs, size_t rank,
                                             const std::vector<int>& order);

}  // namespace flow::jit

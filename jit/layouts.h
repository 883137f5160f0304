// Note: layouts of graph values inside an Executable. Graph inputs have the strides they were
// compiled for, every kernel output is a fresh contiguous tensor, and a view value aliases its
// root (an input or a kernel output) with a layout computed here once, at compile time, by the
// op table's ViewFn — so at run time a view costs one Tensor struct, and kernels read it through
// strides. A reshape/view whose input cannot be viewed so gets a copy (a `cast` to the same dtype)
// inserted before it by materialize_unviewable().
#pragma once
#include <vector>

#include "dsl/graph.h"
#include "dsl/op_table.h"

namespace flow::jit {

struct ValueLayouts {
  std::vector<int> root;            // the value whose storage `v` lives in (itself for non-views)
  std::vector<dsl::Layout> layout;  // relative to the root's own offset
  std::vector<bool> is_view;
};

// Rebuilds `g` with a copy before every view op whose input layout is not viewable (no-op when
// all are). `input_strides[i]` empty means contiguous.
dsl::Graph materialize_unviewable(const dsl::Graph& g, const std::vector<std::vector<int64_t>>& input_strides);

// Layouts of every value; throws std::logic_error if a view is not viewable (call
// materialize_unviewable first).
ValueLayouts compute_layouts(const dsl::Graph& g, const std::vector<std::vector<int64_t>>& input_strides);

}  // namespace flow::jit

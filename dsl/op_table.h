// Note: the op table, one entry per op kind in one place (dsl/ops/*.cpp register them). An entry
// holds everything every layer needs to know about the op: its pattern class for fusion, type
// inference, and either an elementwise compute definition, a reduction spec, or a decomposition
// into other ops (composites such as softmax). Eager, jit, CPU, GPU and the reference
// interpreter all derive from this entry; adding an op is this entry, a Python binding, and tests.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dsl/expr.h"
#include "dsl/graph.h"
#include "dsl/stmt.h"

namespace flow::dsl {

enum class OpPattern : uint8_t {
  Elementwise,      // out[i] = f(in_k[i]) with broadcasting
  Injective,        // views and index remapping (later issues)
  Reduction,        // sum/amax/... over a set of dims
  OutEWiseFusable,  // a library call (conv, matmul, argsort); scheduler/library_patterns.h says
                    // which elementwise epilogues it takes
  Opaque,           // never fused
  Composite,        // expands into other ops at graph-build time
  View,             // the output aliases input 0 with another layout (reshape, permute, slice, ...)
};

// A strided view of storage: element strides and an element offset.
struct Layout {
  Shape sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};
Layout contiguous_layout(const Shape& sizes);
// The layout of a View op's output given its input's layout, or nullopt when that input layout
// cannot be viewed so (reshape of a non-contiguous tensor): the caller copies the input first.
using ViewFn = std::function<std::optional<Layout>(const Layout& in, const Attrs& attrs)>;

// Injective ops (cat, pad, index_select, gather, embedding): the output element at `out_idx` (one
// Int64 Expr per output dim) as an expression over input elements; `load(k, idx)` is input k's
// value (in its compute dtype) at index `idx` (one Expr per dim of input k). Inputs of an
// injective op are always read from memory, so any index is allowed.
using InputLoader = std::function<Expr(int k, const std::vector<Expr>& idx)>;
struct OpContext;
using InjectiveFn =
    std::function<Expr(const std::vector<Expr>& out_idx, const InputLoader& load, const OpContext& ctx)>;
const char* op_pattern_name(OpPattern p);

struct OpContext {
  std::vector<TensorType> inputs;
  std::vector<TensorType> outputs;
  const Attrs* attrs = nullptr;
  // Parallel to `inputs`: whether each input is a wrapped number (a Python scalar), which matters for
  // type promotion (comparisons compare in torch.result_type of their inputs). Empty = none.
  std::vector<bool> wrapped_number;
};
// The context of node `n` of `g` (input and output types, attrs, wrapped-number flags). Use this
// rather than filling an OpContext by hand; the returned context points at n.attrs.
OpContext make_op_context(const Graph& g, const Node& n);

// Elementwise: given the input values, each already loaded and converted to its compute dtype
// (halves become float32), return the output value in compute_dtype(output dtype).
using ComputeFn = std::function<Expr(const std::vector<Expr>& in, const OpContext& ctx)>;
using InferFn =
    std::function<std::vector<TensorType>(const Graph& g, const std::vector<int>& inputs, const Attrs& attrs)>;
using DecomposeFn = std::function<std::vector<int>(Graph& g, const std::vector<int>& inputs, const Attrs& attrs)>;
// Validates the user's attrs and returns their canonical form (defaults filled, aliases resolved,
// "dims" normalized and sorted), which Graph::add_op passes to `infer` and stores in the node, so
// equal ops hash equal and later passes can rely on the canonical form. Optional: when empty the
// attrs are stored as given.
using CanonicalizeFn = std::function<Attrs(const Graph& g, const std::vector<int>& inputs, const Attrs& attrs)>;

struct ReduceSpec {
  ReduceOp op;
  bool mean = false;  // divide the sum by the number of reduced elements
  // The accumulation dtype, called with the node's OUTPUT dtype (float32 for halves, float64 for
  // float64, int64 for ints/bool). A reduction computes, with acc = acc_dtype(out):
  //   out = cast<out>(fold(reduce_combine, reduce_identity, cast<acc>(cast<out>(x_i))) [/ count for mean])
  // (the inner cast is the "dtype" attr of sum/mean: the input is converted first, as in torch).
  std::function<DType(DType out)> acc_dtype;
  // Value-and-index reductions (max/min along a dim with indices, argmax/argmin): `op` is Max or
  // Min, the accumulator is a (value, int64 index) pair, the first occurrence wins ties and a NaN
  // wins over numbers (torch). The node's outputs are (values, indices) or, for argmax/argmin,
  // (indices) only; the index counts the reduced elements in row-major order.
  bool arg = false;
  // Scans (cumsum/cumprod along attr "dims" = [dim]): the output has the input's shape, element j
  // of a row being fold(op) over elements 0..j; an own kernel (see scheduler/scan).
  bool scan = false;
};

// Optional: what `infer` reads of a scalar input's value (input position, value -> a key
// character). Eager calls pass scalars as kernel parameters and key their cached plans by dtypes
// and shapes only (jit/eager.cpp); they add this key, so a value that infer would refuse is
// refused on every call, not only on the first one compiled.
using ScalarKeyFn = std::function<char(int input, double value)>;

struct OpDef {
  std::string name;
  OpPattern pattern;
  int num_inputs = -1;  // -1: variadic
  InferFn infer;
  ComputeFn compute;                 // Elementwise
  std::optional<ReduceSpec> reduce;  // Reduction: attrs "dims" (normalized, sorted) and "keepdim"
  DecomposeFn decompose;             // Composite
  CanonicalizeFn canonicalize;       // optional, runs before infer (see CanonicalizeFn)
  ViewFn view;                       // View
  InjectiveFn injective;             // Injective
  ScalarKeyFn scalar_key;            // optional (see ScalarKeyFn)
};

// The registry. lookup throws OpError(NotImplemented) for an unknown op. The built-in ops are
// registered on first use of any of these functions (std::call_once, not static initializers,
// which the linker drops from static libraries); register_op throws std::logic_error on a
// duplicate name.
const OpDef& lookup_op(const std::string& name);
const OpDef* find_op(const std::string& name);
std::vector<std::string> all_op_names();
void register_op(OpDef def);

// The convolution library ops (dsl/ops/library.cpp): their spatial rank (2 for conv2d and
// conv_transpose2d, 3 for conv3d and conv_transpose3d; 0 for any other op), and whether the op is
// a transposed one.
size_t conv_spatial_rank(const std::string& op);
bool is_transposed_conv(const std::string& op);

// Shared helpers for entries (broadcasting and promotion follow torch).
Shape broadcast_shapes(const Shape& a, const Shape& b);  // throws OpError with torch's message
// torch.result_type over graph values (dimensioned tensors > 0-dim tensors > wrapped numbers).
DType result_type(const Graph& g, const std::vector<int>& values);

}  // namespace flow::dsl

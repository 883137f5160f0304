// Note: injective ops: every output element is one input element chosen by index arithmetic (and,
// for index_select/gather/embedding, by a value loaded from an index tensor). They lower inside a
// pointwise kernel as loads at remapped indices, so their elementwise consumers fuse after them.
// Shapes are static here (sizes are constants in the index math): a new shape compiles anew.
#include <algorithm>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

void add_injective(const std::string& name, int num_inputs, InferFn infer, InjectiveFn fn) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Injective;
  d.num_inputs = num_inputs;
  d.infer = std::move(infer);
  d.injective = std::move(fn);
  register_builtin(std::move(d));
}

Expr idx_load_as_int(const InputLoader& load, int k, const std::vector<Expr>& idx) {
  return cast(DType::Int64, load(k, idx));
}

// An index value along `dim` of size n, checked (CheckIndex: out of range raises after the kernel,
// as torch's checks do) and wrapped from [-n, n) to [0, n) where negatives are allowed (Python
// indexing; torch's embedding refuses them). The clamp after the check keeps the generated load in
// bounds while the kernel finishes.
Expr wrap_index(Expr i, int64_t n, int64_t dim, bool negatives = true, bool as_runtime_error = false) {
  const Expr checked = check_index(std::move(i), negatives ? -n : 0, n, dim, as_runtime_error);
  // checked + (checked < 0 ? n : 0): the check outside the select's arms, where the code generators
  // evaluate it unconditionally (a check in an arm is evaluated only when that arm is chosen).
  const Expr w = negatives ? checked + select(checked < make_int(0), make_int(n), make_int(0)) : checked;
  return max(make_int(0), min(w, make_int(std::max<int64_t>(n - 1, 0))));
}

// index_select and gather wrap negative indices (advanced indexing, take) unless "nonnegative" is
// set (torch.index_select and torch.gather themselves, which refuse them).
bool negatives_allowed(const OpContext& ctx) {
  const AttrValue* v = attr_find(*ctx.attrs, "nonnegative");
  return !(v && attr_int(*ctx.attrs, "nonnegative", "index op") != 0);
}

// Any index into a dim of size 0 is out of range: raised when the graph is built, since the kernel
// would have no element to read while it reports (torch's message for index_select and embedding).
void check_indexable(int64_t size, const Shape& index_shape) {
  if (size == 0 && numel(index_shape) > 0) throw OpError(OpError::Kind::Index, "index out of range in self");
}

}  // namespace

void register_injective_ops() {
  // cat(tensors..., dim): same dtype (promoted as torch), same shape except at dim.
  add_injective(
      "cat", -1,
      [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
        check_attrs("cat", a, {"dim"});
        if (in.empty()) throw OpError(OpError::Kind::Value, "torch.cat(): expected a non-empty list of Tensors");
        const auto types = value_types(g, in);
        const int64_t rank = static_cast<int64_t>(types[0].shape.size());
        if (rank == 0)
          throw OpError(OpError::Kind::Value, "zero-dimensional tensor (at position 0) cannot be concatenated");
        const int64_t dim = normalize_dim(attr_int(a, "dim", "cat"), rank);
        Shape out = types[0].shape;
        out[dim] = 0;
        DType dt = types[0].dtype;
        for (size_t k = 0; k < types.size(); ++k) {
          if (static_cast<int64_t>(types[k].shape.size()) != rank)
            throw OpError(OpError::Kind::Value, "Tensors must have same number of dimensions: got " +
                                                    std::to_string(rank) + " and " +
                                                    std::to_string(types[k].shape.size()));
          for (int64_t d = 0; d < rank; ++d)
            if (d != dim && types[k].shape[d] != types[0].shape[d])
              throw OpError(OpError::Kind::Value, "Sizes of tensors must match except in dimension " +
                                                      std::to_string(dim) + ". Expected size " +
                                                      std::to_string(types[0].shape[d]) + " but got size " +
                                                      std::to_string(types[k].shape[d]) + " for tensor number " +
                                                      std::to_string(k) + " in the list.");
          out[dim] += types[k].shape[dim];
          dt = promote_types(dt, types[k].dtype);
        }
        return std::vector<TensorType>{{out, dt}};
      },
      [](const std::vector<Expr>& oi, const InputLoader& load, const OpContext& ctx) {
        const int64_t dim = normalize_dim(attr_int(*ctx.attrs, "dim", "cat"), static_cast<int64_t>(oi.size()));
        const DType ct = compute_dtype(ctx.outputs[0].dtype);
        // Innermost choice last: select(i < end0, in0, select(i < end1, in1, ...)).
        std::vector<int64_t> start(ctx.inputs.size() + 1, 0);
        for (size_t k = 0; k < ctx.inputs.size(); ++k) start[k + 1] = start[k] + ctx.inputs[k].shape[dim];
        Expr result;
        for (size_t k = ctx.inputs.size(); k-- > 0;) {
          if (ctx.inputs[k].shape[dim] == 0) continue;
          std::vector<Expr> idx = oi;
          idx[dim] = oi[dim] - make_int(start[k]);
          const Expr v = cast(ct, load(static_cast<int>(k), idx));
          result = result.defined() ? select(oi[dim] < make_int(start[k + 1]), v, result) : v;
        }
        return result.defined() ? result : make_zero(ct);
      });

  // pad(x, pads, value): torch.nn.functional.pad, mode "constant"; pads = [last_lo, last_hi, ...].
  add_injective(
      "pad", 1,
      [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
        check_attrs("pad", a, {"pads", "value"});
        TensorType t = g.value(in.at(0)).type;
        const auto pads = attr_ints(a, "pads", "pad");
        if (pads.size() % 2 != 0 || pads.size() / 2 > t.shape.size())
          throw OpError(OpError::Kind::Value, "Padding length must be divisible by 2 and at most twice the input rank");
        for (size_t p = 0; p < pads.size() / 2; ++p) {
          const size_t d = t.shape.size() - 1 - p;
          t.shape[d] += pads[2 * p] + pads[2 * p + 1];
          if (t.shape[d] < 0) throw OpError(OpError::Kind::Value, "negative output size after padding");
        }
        return std::vector<TensorType>{t};
      },
      [](const std::vector<Expr>& oi, const InputLoader& load, const OpContext& ctx) {
        const auto pads = attr_ints(*ctx.attrs, "pads", "pad");
        const double value = attr_find(*ctx.attrs, "value") ? attr_float(*ctx.attrs, "value", "pad") : 0.0;
        const DType ct = compute_dtype(ctx.outputs[0].dtype);
        const Shape& in = ctx.inputs[0].shape;
        std::vector<Expr> idx = oi;
        Expr inside;
        std::vector<bool> padded(in.size(), false);  // dims with a nonzero pad on either side
        for (size_t p = 0; p < pads.size() / 2; ++p) {
          const size_t d = in.size() - 1 - p;
          if (pads[2 * p] == 0 && pads[2 * p + 1] == 0) continue;  // the output index is the input's
          padded[d] = true;
          idx[d] = oi[d] - make_int(pads[2 * p]);
          const Expr ok = idx[d] >= make_int(0) && idx[d] < make_int(in[d]);
          inside = inside.defined() ? (inside && ok) : ok;
        }
        const Expr fill = is_floating(ct) ? make_float(value, ct) : make_int(static_cast<int64_t>(value), ct);
        if (!inside.defined()) return cast(ct, load(0, idx));
        // Clamp the padded dims' indices so the (discarded) load of a padded position stays in
        // bounds; the other dims read at the output's index, in order (so they stay contiguous).
        std::vector<Expr> safe = idx;
        for (size_t d = 0; d < safe.size(); ++d)
          if (padded[d]) safe[d] = max(make_int(0), min(idx[d], make_int(std::max<int64_t>(in[d] - 1, 0))));
        return select(inside, cast(ct, load(0, safe)), fill);
      });

  // flip(x, dims): torch.flip, a copy with the index along each of dims reversed (n - 1 - i). Plain
  // index arithmetic, so a vector loop reads a flipped innermost dim with one load and a reversing
  // shuffle (an index_select with a reversed arange would gather through the index tensor).
  add_injective(
      "flip", 1,
      [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
        check_attrs("flip", a, {"dims"});
        const TensorType& t = g.value(in.at(0)).type;
        const auto dims = attr_ints(a, "dims", "flip");
        if (!dims.empty()) normalize_dims(dims, static_cast<int64_t>(t.shape.size()));  // range, duplicates
        return std::vector<TensorType>{t};
      },
      [](const std::vector<Expr>& oi, const InputLoader& load, const OpContext& ctx) {
        const auto dims = attr_ints(*ctx.attrs, "dims", "flip");
        const Shape& in = ctx.inputs[0].shape;
        std::vector<Expr> idx = oi;
        if (!dims.empty() && !in.empty())
          for (const int64_t d : normalize_dims(dims, static_cast<int64_t>(in.size())))
            if (in[d] > 1) idx[d] = make_int(in[d] - 1) - oi[d];
        return cast(compute_dtype(ctx.outputs[0].dtype), load(0, idx));
      });

  // index_select(x, index, dim): index is a 1-D int32/int64 tensor. Attr "nonnegative" (0/1).
  add_injective(
      "index_select", 2,
      [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
        check_attrs("index_select", a, {"dim", "nonnegative"});
        TensorType t = g.value(in.at(0)).type;
        const TensorType& ix = g.value(in.at(1)).type;
        if (ix.dtype != DType::Int64 && ix.dtype != DType::Int32)
          throw OpError(OpError::Kind::Value, "index_select(): Expected dtype int32/int64 for index");
        if (ix.shape.size() > 1)
          throw OpError(OpError::Kind::Index, "index_select(): Index is supposed to be a vector");
        const int64_t dim = normalize_dim(attr_int(a, "dim", "index_select"), static_cast<int64_t>(t.shape.size()));
        if (!t.shape.empty()) check_indexable(t.shape[dim], ix.shape);
        if (!t.shape.empty()) t.shape[dim] = ix.shape.empty() ? 1 : ix.shape[0];
        return std::vector<TensorType>{t};
      },
      [](const std::vector<Expr>& oi, const InputLoader& load, const OpContext& ctx) {
        const int64_t dim = normalize_dim(attr_int(*ctx.attrs, "dim", "index_select"), static_cast<int64_t>(oi.size()));
        std::vector<Expr> idx = oi;
        if (!oi.empty()) {
          const std::vector<Expr> at = ctx.inputs[1].shape.empty() ? std::vector<Expr>{} : std::vector<Expr>{oi[dim]};
          idx[dim] = wrap_index(idx_load_as_int(load, 1, at), ctx.inputs[0].shape[dim], dim, negatives_allowed(ctx));
        }
        return cast(compute_dtype(ctx.outputs[0].dtype), load(0, idx));
      });

  // gather(x, index, dim): out[i] = x[i with i[dim] = index[i]]; out has index's shape. Attr
  // "nonnegative" (0/1), as index_select's.
  add_injective(
      "gather", 2,
      [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
        check_attrs("gather", a, {"dim", "nonnegative"});
        const TensorType& x = g.value(in.at(0)).type;
        const TensorType& ix = g.value(in.at(1)).type;
        if (ix.dtype != DType::Int64) throw OpError(OpError::Kind::Value, "gather(): Expected dtype int64 for index");
        if (ix.shape.size() != x.shape.size())
          throw OpError(OpError::Kind::Value, "Index tensor must have the same number of dimensions as input tensor");
        const int64_t dim = normalize_dim(attr_int(a, "dim", "gather"), static_cast<int64_t>(x.shape.size()));
        if (!x.shape.empty()) check_indexable(x.shape[dim], ix.shape);
        return std::vector<TensorType>{{ix.shape, x.dtype}};
      },
      [](const std::vector<Expr>& oi, const InputLoader& load, const OpContext& ctx) {
        const int64_t dim = normalize_dim(attr_int(*ctx.attrs, "dim", "gather"), static_cast<int64_t>(oi.size()));
        std::vector<Expr> idx = oi;
        // torch.gather's own check (nonnegative) raises RuntimeError; take's wrapping ones IndexError
        const bool gather_check = !negatives_allowed(ctx);
        idx[dim] = wrap_index(idx_load_as_int(load, 1, oi), ctx.inputs[0].shape[dim], dim, !gather_check, gather_check);
        return cast(compute_dtype(ctx.outputs[0].dtype), load(0, idx));
      });

  // embedding(indices, weight): out[..., j] = weight[indices[...], j].
  add_injective(
      "embedding", 2,
      [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
        check_attrs("embedding", a, {});
        const TensorType& ix = g.value(in.at(0)).type;
        const TensorType& w = g.value(in.at(1)).type;
        if (ix.dtype != DType::Int64 && ix.dtype != DType::Int32)
          throw OpError(OpError::Kind::Type,
                        "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
                        "Int; but got " +
                            std::string(torch_dtype_name(ix.dtype)) +
                            " instead (while checking arguments for embedding)");
        if (w.shape.size() != 2) throw OpError(OpError::Kind::Value, "'weight' must be 2-D");
        check_indexable(w.shape[0], ix.shape);
        Shape out = ix.shape;
        out.push_back(w.shape[1]);
        return std::vector<TensorType>{{out, w.dtype}};
      },
      [](const std::vector<Expr>& oi, const InputLoader& load, const OpContext& ctx) {
        const std::vector<Expr> at(oi.begin(), oi.end() - 1);
        const Expr row = wrap_index(idx_load_as_int(load, 0, at), ctx.inputs[1].shape[0], 0, false);
        return cast(compute_dtype(ctx.outputs[0].dtype), load(1, {row, oi.back()}));
      });
}

}  // namespace flow::dsl

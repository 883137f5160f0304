// Note: see graph_interpreter.h. The interpreter walks the nodes in order (the arena is
// topological), keeps one HostTensor per value, and evaluates each node from its op table entry,
// never from a second copy of the op's semantics. Broadcasting reads input element
// sum_d idx[d] * stride[d] with the stride of a broadcast (size-1 or missing) dim set to 0.
#include "dsl/graph_interpreter.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>

#include "dsl/interpreter.h"
#include "dsl/library_reference.h"
#include "dsl/op_table.h"
#include "dsl/reduction_reference.h"

namespace flow::dsl {

namespace {

Scalar to_scalar(DType t, double v) {
  Scalar s{t};
  if (is_floating(t)) {
    s.f = v;
  } else {
    s.i = static_cast<int64_t>(v);
  }
  return s;
}

double from_scalar(const Scalar& s) {
  return is_floating(s.type) ? s.f : static_cast<double>(s.i);
}

// Row-major strides of `in` as seen from an output of shape `out` (right-aligned, broadcast dims 0).
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t d_in = in.size() - 1 - k, d_out = out.size() - 1 - k;
    strides[d_out] = in[d_in] == 1 ? 0 : stride;
    stride *= in[d_in];
  }
  return strides;
}

// Calls f(flat index of each input) for every element of `out` in row-major order.
template <class F>
void for_each_element(const Shape& out, const std::vector<std::vector<int64_t>>& strides, F&& f) {
  const int64_t n = numel(out);
  std::vector<int64_t> idx(out.size(), 0);
  std::vector<int64_t> offs(strides.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    f(offs);
    for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {  // increment the multi-index
      for (size_t k = 0; k < strides.size(); ++k) offs[k] += strides[k][d];
      if (++idx[d] < out[d]) break;
      for (size_t k = 0; k < strides.size(); ++k) offs[k] -= strides[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

HostTensor run_elementwise(const Graph& g, const Node& n, const OpDef& def, const std::vector<const HostTensor*>& in,
                           const InterpOptions& opt) {
  const OpContext ctx = make_op_context(g, n);
  std::vector<Expr> vars;
  for (size_t k = 0; k < in.size(); ++k)
    vars.push_back(var("in" + std::to_string(k), compute_dtype(in[k]->type.dtype)));
  const Expr e = def.compute(vars, ctx);
  const TensorType out_t = ctx.outputs.at(0);
  if (!e.defined() || e.type() != compute_dtype(out_t.dtype)) {
    throw std::logic_error("op table: compute of '" + n.op + "' returned " +
                           (e.defined() ? dtype_name(e.type()) : "nothing") + ", expected " +
                           dtype_name(compute_dtype(out_t.dtype)));
  }
  std::vector<std::vector<int64_t>> strides;
  for (const HostTensor* t : in) strides.push_back(broadcast_strides(t->type.shape, out_t.shape));
  HostTensor out{out_t, {}};
  out.data.reserve(static_cast<size_t>(numel(out_t.shape)));
  for_each_element(out_t.shape, strides, [&](const std::vector<int64_t>& offs) {
    const auto lookup = [&](const std::string& name) -> Scalar {
      for (size_t k = 0; k < vars.size(); ++k) {
        if (vars[k].as<Var>()->name == name) return to_scalar(vars[k].type(), in[k]->data[offs[k]]);
      }
      throw std::logic_error("interpret_graph: compute of '" + n.op + "' reads an unknown variable '" + name + "'");
    };
    const Scalar r = eval_expr(e, lookup, nullptr, opt);
    out.data.push_back(round_to_dtype(out_t.dtype, from_scalar(r), opt.float64_math));
  });
  return out;
}

HostTensor run_reduction(const Graph& g, const Node& n, const OpDef& def, const HostTensor& x,
                         const InterpOptions& opt) {
  const ReduceSpec& spec = *def.reduce;
  const TensorType out_t = g.value(n.outputs.at(0)).type;
  const std::vector<int64_t> dims = attr_ints(n.attrs, "dims", n.op);
  const DType acc = spec.acc_dtype(out_t.dtype);
  const Shape& in_shape = x.type.shape;
  // Strides of the output (without the reduced dims) indexed by input dim; reduced dims get 0.
  Shape kept;
  std::vector<bool> reduced(in_shape.size(), false);
  for (int64_t d : dims) reduced.at(static_cast<size_t>(d)) = true;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (!reduced[d]) kept.push_back(in_shape[d]);
  }
  std::vector<int64_t> out_strides(in_shape.size(), 0);
  int64_t stride = 1;
  for (int d = static_cast<int>(in_shape.size()) - 1; d >= 0; --d) {
    if (reduced[d]) continue;
    out_strides[d] = stride;
    stride *= in_shape[d];
  }
  std::vector<int64_t> in_strides(in_shape.size(), 0);
  stride = 1;
  for (int d = static_cast<int>(in_shape.size()) - 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= in_shape[d];
  }

  const Expr xv = var("x", compute_dtype(x.type.dtype));
  const Expr convert = cast(acc, cast(out_t.dtype, xv));  // the "dtype" conversion, then the accumulator
  const Expr a = var("a", acc), b = var("b", acc);
  const Expr combine = reduce_combine(spec.op, a, b);
  const Scalar identity = eval_expr(reduce_identity(spec.op, acc), nullptr, nullptr, opt);

  const int64_t out_n = numel(kept);
  std::vector<Scalar> accs(static_cast<size_t>(out_n), identity);
  for_each_element(in_shape, {in_strides, out_strides}, [&](const std::vector<int64_t>& offs) {
    const Scalar v = eval_expr(
        convert, [&](const std::string&) { return to_scalar(xv.type(), x.data[offs[0]]); }, nullptr, opt);
    Scalar& s = accs[offs[1]];
    s = eval_expr(
        combine, [&](const std::string& name) { return name == "a" ? s : v; }, nullptr, opt);
  });

  const int64_t count = out_n == 0 ? 0 : numel(in_shape) / out_n;
  const Expr finish = spec.mean ? cast(compute_dtype(out_t.dtype), a / make_float(static_cast<double>(count), acc))
                                : cast(compute_dtype(out_t.dtype), a);
  HostTensor out{out_t, {}};
  out.data.reserve(accs.size());
  for (const Scalar& s : accs) {
    const Scalar r = eval_expr(
        finish, [&](const std::string&) { return s; }, nullptr, opt);
    out.data.push_back(round_to_dtype(out_t.dtype, from_scalar(r), opt.float64_math));
  }
  return out;
}

}  // namespace

double round_to_dtype(DType t, double v, bool float64_math) {
  switch (t) {
    case DType::Bool:
      return v != 0 ? 1.0 : 0.0;  // NaN != 0: true
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:  // through int32, then wrapped (the interpreter's cast)
      return static_cast<double>(wrap_integer(t, static_cast<int64_t>(round_to_dtype(DType::Int32, v, float64_math))));
    case DType::Int32:
    case DType::Int64: {
      if (std::isnan(v)) return t == DType::Int32 ? std::numeric_limits<int32_t>::min() : -0x1p63;
      const double tr = std::trunc(v);
      if (t == DType::Int32) {
        // Wrap modulo 2^32 (exact in double for |v| < 2^53).
        double w = std::fmod(tr, 4294967296.0);
        if (w >= 2147483648.0) w -= 4294967296.0;
        if (w < -2147483648.0) w += 4294967296.0;
        return w;
      }
      return tr;
    }
    case DType::Float16:
      return float64_math ? v : static_cast<double>(half_bits_to_float(float_to_half_bits(static_cast<float>(v))));
    case DType::BFloat16:
      return float64_math ? v : static_cast<double>(bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v))));
    case DType::Float32:
      return float64_math ? v : static_cast<double>(static_cast<float>(v));
    case DType::Float64:
      return v;
  }
  return v;
}

// An injective op: its expression over symbolic output indices o0, o1, ... and loads "in<k>" at
// row-major offsets, evaluated per output element.
static HostTensor run_injective(const Graph& g, const Node& n, const OpDef& def,
                                const std::vector<const HostTensor*>& in, const InterpOptions& opt) {
  const TensorType out_t = g.value(n.outputs.at(0)).type;
  std::vector<Expr> oi;
  for (size_t d = 0; d < out_t.shape.size(); ++d) oi.push_back(var("o" + std::to_string(d)));
  const InputLoader loader = [&](int k, const std::vector<Expr>& idx) {
    const TensorType& t = in.at(k)->type;
    const auto st = contiguous_layout(t.shape).strides;
    Expr flat = make_int(0);
    for (size_t d = 0; d < idx.size(); ++d) flat = flat + idx[d] * make_int(st[d]);
    return cast(compute_dtype(t.dtype), load(t.dtype, "in" + std::to_string(k), flat));
  };
  const Expr e = def.injective(oi, loader, make_op_context(g, n));
  HostTensor out{out_t, {}};
  const int64_t total = numel(out_t.shape);
  out.data.reserve(static_cast<size_t>(total));
  std::vector<int64_t> idx(out_t.shape.size(), 0);
  for (int64_t c = 0; c < total; ++c) {
    const auto lookup = [&](const std::string& name) -> Scalar {
      Scalar s{DType::Int64};
      s.i = idx.at(std::stoul(name.substr(1)));
      return s;
    };
    const auto loadfn = [&](const std::string& buf, int64_t index, DType t) -> Scalar {
      const HostTensor* src = in.at(std::stoul(buf.substr(2)));
      if (index < 0 || index >= static_cast<int64_t>(src->data.size()))
        throw std::runtime_error("interpret_graph: " + n.op + " reads index " + std::to_string(index) +
                                 " out of range");
      return to_scalar(t, src->data[static_cast<size_t>(index)]);
    };
    out.data.push_back(round_to_dtype(out_t.dtype, from_scalar(eval_expr(e, lookup, loadfn, opt)), opt.float64_math));
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < out_t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// A view gathers through the op's ViewFn applied to the (contiguous) input.
static HostTensor run_view(const Graph& g, const Node& n, const OpDef& def, const HostTensor& in) {
  const auto l = def.view(contiguous_layout(in.type.shape), n.attrs);
  if (!l) throw std::logic_error("interpret_graph: view of a contiguous tensor failed");
  HostTensor out{g.value(n.outputs.at(0)).type, {}};
  const int64_t total = numel(l->sizes);
  out.data.resize(static_cast<size_t>(total));
  std::vector<int64_t> idx(l->sizes.size(), 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t off = l->offset;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * l->strides[d];
    out.data[static_cast<size_t>(k)] = in.data.at(static_cast<size_t>(off));
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < l->sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<HostTensor> interpret_graph(const Graph& g, const std::vector<HostTensor>& inputs, bool float64_math) {
  const InterpOptions opt{float64_math};
  if (inputs.size() != g.inputs().size()) {
    throw std::invalid_argument("interpret_graph: the graph takes " + std::to_string(g.inputs().size()) +
                                " inputs, got " + std::to_string(inputs.size()));
  }
  std::vector<std::optional<HostTensor>> env(g.values().size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value& v = g.value(g.inputs()[k]);
    const HostTensor& t = inputs[k];
    if (!(t.type == v.type) || static_cast<int64_t>(t.data.size()) != numel(t.type.shape)) {
      throw std::invalid_argument("interpret_graph: input " + std::to_string(k) + " is " + t.type.str() + " with " +
                                  std::to_string(t.data.size()) + " values, expected " + v.type.str());
    }
    HostTensor r = t;
    for (double& x : r.data) x = round_to_dtype(r.type.dtype, x);
    env[v.id] = std::move(r);
  }
  for (const Value& v : g.values()) {
    if (v.kind == ValueKind::Constant) env[v.id] = HostTensor{v.type, {round_to_dtype(v.type.dtype, v.scalar)}};
  }
  for (const Node& n : g.nodes()) {
    const OpDef& def = lookup_op(n.op);
    std::vector<const HostTensor*> in;
    for (int id : n.inputs) {
      if (!env[id]) throw std::logic_error("interpret_graph: value %" + std::to_string(id) + " used before defined");
      in.push_back(&*env[id]);
    }
    if (def.pattern == OpPattern::Elementwise && def.compute) {
      env[n.outputs.at(0)] = run_elementwise(g, n, def, in, opt);
    } else if (def.pattern == OpPattern::Reduction && def.reduce && (def.reduce->arg || def.reduce->scan)) {
      std::vector<HostTensor> outs = run_arg_or_scan(g, n, def, *in.at(0), opt.float64_math);
      for (size_t k = 0; k < outs.size(); ++k) env[n.outputs.at(k)] = std::move(outs[k]);
    } else if (def.pattern == OpPattern::Reduction && def.reduce) {
      env[n.outputs.at(0)] = run_reduction(g, n, def, *in.at(0), opt);
    } else if (def.pattern == OpPattern::Injective && def.injective) {
      env[n.outputs.at(0)] = run_injective(g, n, def, in, opt);
    } else if (def.pattern == OpPattern::View && def.view) {
      env[n.outputs.at(0)] = run_view(g, n, def, *in.at(0));
    } else if (def.pattern == OpPattern::OutEWiseFusable && has_library_reference(n.op)) {
      env[n.outputs.at(0)] = run_library_reference(g, n, in, opt.float64_math);
    } else {
      throw std::runtime_error(std::string("interpret_graph: cannot interpret op '") + n.op + "' (" +
                               op_pattern_name(def.pattern) + ")");
    }
  }
  std::vector<HostTensor> out;
  for (int id : g.outputs()) {
    if (!env[id]) throw std::logic_error("interpret_graph: output %" + std::to_string(id) + " is not computed");
    out.push_back(*env[id]);
  }
  return out;
}

}  // namespace flow::dsl

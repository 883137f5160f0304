// Note: more reductions. Attrs as the basic reductions (dsl/ops/reduction.cpp): "dims" (list; empty
// or missing = all), "keepdim" (default false), canonicalized to normalized sorted "dims" and an
// explicit "keepdim".
//   prod(x; dims, keepdim, dtype)      ReduceOp::Prod; ints/bool give int64 (as sum).
//   any/all(x; dims, keepdim)          bool results; accumulate nonzero tests in int64 (any: sum,
//                                      all: min), so an empty reduction gives False / True.
//   argmax/argmin(x; dim?, keepdim)    value-and-index reductions (ReduceSpec::arg), int64 result;
//   max_dim/min_dim(x; dim, keepdim)   outputs (values, indices) (torch.max(x, dim)). "dim" is one
//                                      int, or absent for argmax/argmin (flat index over all dims).
//   cumsum/cumprod(x; dim, dtype)      scans (ReduceSpec::scan), output of x's shape; ints/bool
//                                      give int64. Canonical attrs: "dims" = [dim] ([] for 0-dim).
// Composites (decompose into mean/sum/amax and elementwise ops, one reduction kernel each):
//   var/std(x; dims, correction=1 (or unbiased=bool), keepdim): two-pass sum((x - mean)^2) /
//       max(N - correction, 0); var_mean/std_mean(...) -> (var or std, mean).
//   norm(x; p=2, dims, keepdim): p = 2: sqrt(sum(x^2)); 1: sum|x|; inf/-inf: amax/amin |x|;
//       0: count of nonzeros; else sum(|x|^p)^(1/p). Floating inputs only.
//   logsumexp(x; dims, keepdim): m + log(sum(exp(x - m))), m = amax with infinities replaced by
//       0 (torch), ints computed in float32; an empty reduced extent gives -inf.
// Composites compute with keepdim=true and view the result to the reduced shape at the end, so the
// row values stay inside the reduction kernel.
#include <algorithm>
#include <cmath>
#include <limits>

#include "dsl/ops/moments.h"
#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

DType sum_acc(DType out) {
  if (is_half(out) || out == DType::Float32) return DType::Float32;
  if (out == DType::Float64) return DType::Float64;
  return DType::Int64;
}

std::vector<int64_t> given_dims(const Attrs& a, const std::string& op) {
  if (attr_find(a, "dims")) return attr_ints(a, "dims", op);
  if (attr_find(a, "dim")) {
    const AttrValue* v = attr_find(a, "dim");
    if (std::holds_alternative<std::vector<int64_t>>(*v)) return attr_ints(a, "dim", op);
    return {attr_int(a, "dim", op)};
  }
  return {};
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape s;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      s.push_back(in[d]);
    } else if (keepdim) {
      s.push_back(1);
    }
  }
  return s;
}

// Refuses an empty reduced extent (ops without an identity: argmax, max along a dim, ...).
void check_nonempty(const std::string& op, const Shape& x, const std::vector<int64_t>& given,
                    const std::vector<int64_t>& dims) {
  if (given.empty() && numel(x) == 0) {
    throw OpError(OpError::Kind::Index, op + "(): Expected reduction dim to be specified for input.numel() == 0.");
  }
  for (int64_t d : dims) {
    if (x[d] == 0) {
      throw OpError(OpError::Kind::Index,
                    op + "(): Expected reduction dim " + std::to_string(d) + " to have non-zero size.");
    }
  }
}

enum class Kind { Plain, Bool, Arg, ArgPair, Scan };

void add_reduction(const std::string& name, Kind kind, ReduceOp op, bool has_dtype) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Reduction;
  d.num_inputs = 1;
  d.canonicalize = [name, kind, has_dtype](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    if (kind == Kind::Arg || kind == Kind::ArgPair || kind == Kind::Scan) {
      check_attrs(name, a, {"dim", "dims", "keepdim", "dtype"});
    } else {
      check_attrs(name, a, {"dims", "keepdim", "dtype"});
    }
    if (!has_dtype && attr_find(a, "dtype"))
      throw OpError(OpError::Kind::Type, name + "(): unexpected attribute 'dtype'");
    const TensorType& x = g.value(in[0]).type;
    const int64_t ndim = static_cast<int64_t>(x.shape.size());
    const std::vector<int64_t> given = given_dims(a, name);
    if ((kind == Kind::ArgPair || kind == Kind::Scan) && !attr_find(a, "dim") && !attr_find(a, "dims")) {
      throw OpError(OpError::Kind::Type, name + "(): missing required attribute 'dim'");
    }
    if ((kind == Kind::Arg || kind == Kind::ArgPair || kind == Kind::Scan) && given.size() > 1) {
      throw OpError(OpError::Kind::Type, name + "(): 'dim' must be a single int");
    }
    const std::vector<int64_t> dims = normalize_dims(given, ndim);
    if (kind == Kind::Arg || kind == Kind::ArgPair) {
      if (kind == Kind::Arg && x.dtype == DType::Bool) not_implemented_for(name + "_cpu", x.dtype);
      check_nonempty(kind == Kind::ArgPair ? name.substr(0, 3) : name, x.shape, given, dims);
    }
    Attrs out;
    out["dims"] = dims;
    out["keepdim"] = attr_find(a, "keepdim") ? attr_bool(a, "keepdim", name) : false;
    if (has_dtype && attr_find(a, "dtype")) out["dtype"] = std::string(dtype_name(attr_dtype(a, "dtype", name)));
    return out;
  };
  d.infer = [name, kind](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    const TensorType& x = g.value(in[0]).type;
    const std::vector<int64_t> dims = attr_ints(a, "dims", name);
    const bool keepdim = attr_bool(a, "keepdim", name);
    const Shape shape = reduced_shape(x.shape, dims, keepdim);
    switch (kind) {
      case Kind::Bool:
        return std::vector<TensorType>{{shape, DType::Bool}};
      case Kind::Arg:
        return std::vector<TensorType>{{shape, DType::Int64}};
      case Kind::ArgPair:
        return std::vector<TensorType>{{shape, x.dtype}, {shape, DType::Int64}};
      default:
        break;
    }
    DType t = x.dtype;
    if (attr_find(a, "dtype")) {
      t = attr_dtype(a, "dtype", name);
    } else if (!is_floating(t)) {
      t = DType::Int64;
    }
    return std::vector<TensorType>{{kind == Kind::Scan ? x.shape : shape, t}};
  };
  ReduceSpec spec{op, false, sum_acc};
  if (kind == Kind::Bool) spec.acc_dtype = [](DType) { return DType::Int64; };
  spec.arg = kind == Kind::Arg || kind == Kind::ArgPair;
  spec.scan = kind == Kind::Scan;
  d.reduce = spec;
  register_builtin(std::move(d));
}

// ---- composites -----------------------------------------------------------------------------------

int scalar(Graph& g, double v) {
  return g.add_constant(v, DType::Float64, /*wrapped_number=*/true);
}

int cast_to(Graph& g, int v, DType t) {
  if (g.value(v).type.dtype == t) return v;
  return g.add("cast", {v}, {{"dtype", std::string(dtype_name(t))}});
}

// Views a keepdim result to the reduced shape when !keepdim.
int finish(Graph& g, int v, const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return v;
  const Shape s = reduced_shape(in, dims, false);
  if (g.value(v).type.shape == s) return v;
  return g.add("reshape", {v}, {{"shape", s}});
}

struct Reduce {
  int x;
  TensorType xt;
  std::vector<int64_t> dims;
  bool keepdim;
  Attrs red;  // dims, keepdim=true
  int64_t count;
};

Reduce reduce_args(Graph& g, const std::string& op, const std::vector<int>& in, const Attrs& a,
                   std::initializer_list<const char*> extra) {
  std::vector<const char*> allowed{"dims", "dim", "keepdim"};
  allowed.insert(allowed.end(), extra.begin(), extra.end());
  for (const auto& kv : a) {
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* k) { return kv.first == k; }) == allowed.end()) {
      throw OpError(OpError::Kind::Type, op + "(): unexpected attribute '" + kv.first + "'");
    }
  }
  if (in.size() != 1) {
    throw OpError(OpError::Kind::Type, op + "() takes 1 input(s) but " + std::to_string(in.size()) + " were given");
  }
  Reduce r;
  r.x = in[0];
  r.xt = g.value(in[0]).type;
  r.dims = normalize_dims(given_dims(a, op), static_cast<int64_t>(r.xt.shape.size()));
  r.keepdim = attr_find(a, "keepdim") ? attr_bool(a, "keepdim", op) : false;
  r.red = {{"dims", r.dims}, {"keepdim", true}};
  r.count = 1;
  for (int64_t d : r.dims) r.count *= r.xt.shape[d];
  return r;
}

DType compute_type(DType t) {
  return is_half(t) ? DType::Float32 : t;
}

std::vector<int> var_std(const std::string& op, bool is_std, bool with_mean, Graph& g, const std::vector<int>& in,
                         const Attrs& a) {
  const Reduce r = reduce_args(g, op, in, a, {"correction", "unbiased"});
  if (!is_floating(r.xt.dtype)) {
    throw OpError(OpError::Kind::Value, "std and var only support floating point and complex dtypes");
  }
  double correction = 1;
  if (attr_find(a, "correction")) {
    correction = attr_float(a, "correction", op);
  } else if (attr_find(a, "unbiased")) {
    correction = attr_bool(a, "unbiased", op) ? 1 : 0;
  }
  const DType ct = compute_type(r.xt.dtype);
  const Moments m = row_moments(g, cast_to(g, r.x, ct), r.red, r.count);
  const int mean = m.mean;
  const double denom = std::max(static_cast<double>(r.count) - correction, 0.0);
  int v = g.add("div", {m.m2, scalar(g, denom)});
  if (is_std) v = g.add("sqrt", {v});
  std::vector<int> out{finish(g, cast_to(g, v, r.xt.dtype), r.xt.shape, r.dims, r.keepdim)};
  if (with_mean) out.push_back(finish(g, cast_to(g, mean, r.xt.dtype), r.xt.shape, r.dims, r.keepdim));
  return out;
}

std::vector<int> norm_decompose(Graph& g, const std::vector<int>& in, const Attrs& a) {
  const std::string op = "norm";
  const Reduce r = reduce_args(g, op, in, a, {"p"});
  if (!is_floating(r.xt.dtype)) {
    throw OpError(OpError::Kind::NotImplemented,
                  std::string("linalg.vector_norm: Expected a floating point or complex tensor as input. Got ") +
                      torch_dtype_name(r.xt.dtype));
  }
  const double p = attr_find(a, "p") ? attr_float(a, "p", op) : 2.0;
  const DType ct = compute_type(r.xt.dtype);
  const int xf = cast_to(g, r.x, ct);
  int v = -1;
  if (std::isinf(p)) {
    if (r.count == 0) {
      throw OpError(OpError::Kind::Value,  // (torch's is a RuntimeError, unlike an empty amax's IndexError)
                    "linalg.vector_norm cannot compute the " + std::string(p > 0 ? "inf" : "-inf") +
                        " norm on an empty tensor because the operation does not have an identity");
    }
    v = g.add(p > 0 ? "amax" : "amin", {g.add("abs", {xf})}, r.red);
  } else if (p == 2) {
    v = g.add("sqrt", {g.add("sum", {g.add("mul", {xf, xf})}, r.red)});
  } else if (p == 1) {
    v = g.add("sum", {g.add("abs", {xf})}, r.red);
  } else if (p == 0) {
    v = g.add("sum", {cast_to(g, g.add("ne", {xf, scalar(g, 0)}), ct)}, r.red);
  } else {
    const int s = g.add("sum", {g.add("pow", {g.add("abs", {xf}), scalar(g, p)})}, r.red);
    v = g.add("pow", {s, scalar(g, 1.0 / p)});
  }
  return {finish(g, cast_to(g, v, r.xt.dtype), r.xt.shape, r.dims, r.keepdim)};
}

std::vector<int> logsumexp_decompose(Graph& g, const std::vector<int>& in, const Attrs& a) {
  const std::string op = "logsumexp";
  const Reduce r = reduce_args(g, op, in, a, {});
  const DType out_t = is_floating(r.xt.dtype) ? r.xt.dtype : DType::Float32;
  const DType ct = compute_type(out_t);
  const int xf = cast_to(g, r.x, ct);
  int v = -1;
  if (r.count == 0) {
    v = g.add("log", {g.add("sum", {g.add("exp", {xf})}, r.red)});
  } else {
    const int m = g.add("amax", {xf}, r.red);
    const int m0 = g.add("where", {g.add("isinf", {m}), scalar(g, 0), m});
    const int s = g.add("sum", {g.add("exp", {g.add("sub", {xf, m0})})}, r.red);
    v = g.add("add", {g.add("log", {s}), m0});
  }
  return {finish(g, cast_to(g, v, out_t), r.xt.shape, r.dims, r.keepdim)};
}

void add_composite(const std::string& name, DecomposeFn fn) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Composite;
  d.num_inputs = 1;
  d.decompose = std::move(fn);
  register_builtin(std::move(d));
}

}  // namespace

void register_reduction_more_ops() {
  add_reduction("prod", Kind::Plain, ReduceOp::Prod, true);
  add_reduction("any", Kind::Bool, ReduceOp::Sum, false);
  add_reduction("all", Kind::Bool, ReduceOp::Min, false);
  add_reduction("argmax", Kind::Arg, ReduceOp::Max, false);
  add_reduction("argmin", Kind::Arg, ReduceOp::Min, false);
  add_reduction("max_dim", Kind::ArgPair, ReduceOp::Max, false);
  add_reduction("min_dim", Kind::ArgPair, ReduceOp::Min, false);
  add_reduction("cumsum", Kind::Scan, ReduceOp::Sum, true);
  add_reduction("cumprod", Kind::Scan, ReduceOp::Prod, true);
  for (const bool is_std : {false, true}) {
    for (const bool with_mean : {false, true}) {
      const std::string name = std::string(is_std ? "std" : "var") + (with_mean ? "_mean" : "");
      add_composite(name, [name, is_std, with_mean](Graph& g, const std::vector<int>& in, const Attrs& a) {
        return var_std(name, is_std, with_mean, g, in, a);
      });
    }
  }
  add_composite("norm", norm_decompose);
  add_composite("logsumexp", logsumexp_decompose);
}

}  // namespace flow::dsl

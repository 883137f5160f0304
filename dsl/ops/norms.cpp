// Note: normalizations as composites of primitive ops, written so the fuser makes the fewest
// kernels the schedulers allow:
//   layer_norm(x, [weight], [bias]; normalized_shape, eps=1e-5)
//       mean/var (biased, corrected two-pass: dsl/ops/moments.h) over the last dims, keepdim, then
//       (x - mean) * rsqrt(var + eps) [* w] [+ b]: one persistent-row reduction kernel.
//   rms_norm(x, [weight]; normalized_shape, eps=finfo(dtype).eps) = x * rsqrt(mean(x^2) + eps) [* w]
//   group_norm(x, [weight], [bias]; num_groups, eps=1e-5)
//       x viewed as [N, G, C/G, prod(spatial)], statistics over dims {2, 3}, weight/bias viewed as
//       [G, C/G, 1] so the affine step stays in the same domain, then viewed back: one kernel.
//   batch_norm(x, [running_mean, running_var], [weight], [bias]; training=false, eps=1e-5)
//       eval: (x - rm) * rsqrt(rv + eps) * w + b, every per-channel operand expanded (a stride-0
//       view) to x's shape first so each op is full-domain: one pointwise kernel.
//       training: statistics over every dim but 1; outputs (y, batch_mean, batch_var_unbiased),
//       the last two of shape [C], so the Python layer updates its running stats
//       (running = (1 - momentum) * running + momentum * batch): one reduction kernel.
// Optional operands follow x in the order above; which ones are present is given by the bool attrs
// "has_running_stats" (batch_norm, default true), "has_weight", "has_bias" (defaults: the operands
// left, in order: weight first). Half inputs are computed in float32 and the result cast back
// (batch_norm's batch statistics stay float32, as torch's). eps is a float attr.
#include <cmath>
#include <limits>

#include "dsl/ops/moments.h"
#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

double float_attr_or(const Attrs& a, const std::string& key, const std::string& op, double fallback) {
  return attr_find(a, key) ? attr_float(a, key, op) : fallback;
}

bool bool_attr_or(const Attrs& a, const std::string& key, const std::string& op, bool fallback) {
  return attr_find(a, key) ? attr_bool(a, key, op) : fallback;
}

Attrs red_attrs(std::vector<int64_t> dims, bool keepdim = true) {
  return {{"dims", std::move(dims)}, {"keepdim", keepdim}};
}

int cast_to(Graph& g, int v, DType t) {
  if (g.value(v).type.dtype == t) return v;
  return g.add("cast", {v}, {{"dtype", std::string(dtype_name(t))}});
}

int reshape(Graph& g, int v, const Shape& shape) {
  if (g.value(v).type.shape == shape) return v;
  return g.add("reshape", {v}, {{"shape", shape}});
}

int scalar(Graph& g, double v) {
  return g.add_constant(v, DType::Float64, /*wrapped_number=*/true);
}

void need_floating(const std::string& op, DType t) {
  if (!is_floating(t)) not_implemented_for(op, t);
}

// The optional operands after x (and after `skip` leading required ones): weight and bias.
struct Affine {
  int weight = -1;
  int bias = -1;
};
Affine affine_operands(const std::string& op, const std::vector<int>& in, size_t first, const Attrs& a,
                       bool allow_bias = true) {
  const size_t left = in.size() >= first ? in.size() - first : 0;
  const bool has_w = bool_attr_or(a, "has_weight", op, left >= 1);
  const bool has_b = allow_bias && bool_attr_or(a, "has_bias", op, left >= 2 || (left == 1 && !has_w));
  const size_t want = first + (has_w ? 1 : 0) + (has_b ? 1 : 0);
  if (in.size() != want) {
    throw OpError(OpError::Kind::Type, op + "() takes " + std::to_string(want) +
                                           " input(s) with these attributes but " + std::to_string(in.size()) +
                                           " were given");
  }
  Affine r;
  size_t k = first;
  if (has_w) r.weight = in[k++];
  if (has_b) r.bias = in[k++];
  return r;
}

void check_param_shape(const Graph& g, int v, const Shape& want, const char* what, const std::string& want_name) {
  if (v < 0) return;
  const Shape& s = g.value(v).type.shape;
  if (s != want) {
    throw OpError(OpError::Kind::Value, std::string("Expected ") + what + " to be of same shape as " + want_name +
                                            ", but got " + what + " of shape " + shape_str(s) + " and " + want_name +
                                            " = " + shape_str(want));
  }
}

// (x - mean) * rsqrt(var + eps), statistics over `dims` (keepdim) of xf.
struct Normalized {
  int y, mean, var;
};
Normalized normalize(Graph& g, int xf, const std::vector<int64_t>& dims, double eps) {
  int64_t count = 1;
  for (const int64_t d : dims) count *= g.value(xf).type.shape.at(static_cast<size_t>(d));
  const Moments m = row_moments(g, xf, red_attrs(dims), count);
  const int var = g.add("div", {m.m2, scalar(g, static_cast<double>(count))});
  const int rstd = g.add("rsqrt", {g.add("add", {var, scalar(g, eps)})});
  return {g.add("mul", {m.centered, rstd}), m.mean, var};
}

// Parameters are not cast: type promotion computes in the wider type (a half weight with a float32
// activation multiplies in float32), and a cast of a parameter would be a kernel of its own.
int apply_affine(Graph& g, int y, int w, int b) {
  if (w >= 0) y = g.add("mul", {y, w});
  if (b >= 0) y = g.add("add", {y, b});
  return y;
}

DType compute_type(DType t) {
  return is_half(t) ? DType::Float32 : t;
}

// ---- layer_norm / rms_norm ------------------------------------------------------------------------

std::vector<int64_t> normalized_dims(const std::string& op, const TensorType& xt, const Attrs& a) {
  const std::vector<int64_t> ns = attr_ints(a, "normalized_shape", op);
  if (ns.empty()) {
    throw OpError(OpError::Kind::Value,
                  "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but "
                  "got normalized_shape = []");
  }
  const size_t nd = xt.shape.size();
  bool ok = ns.size() <= nd;
  for (size_t i = 0; ok && i < ns.size(); ++i) ok = xt.shape[nd - ns.size() + i] == ns[i];
  if (!ok) {
    std::string star = "[*";
    for (int64_t s : ns) star += ", " + std::to_string(s);
    throw OpError(OpError::Kind::Value, "Given normalized_shape=" + shape_str(ns) + ", expected input with shape " +
                                            star + "], but got input of size" + shape_str(xt.shape));
  }
  std::vector<int64_t> dims;
  for (size_t i = nd - ns.size(); i < nd; ++i) dims.push_back(static_cast<int64_t>(i));
  return dims;
}

std::vector<int> layer_norm_decompose(Graph& g, const std::vector<int>& in, const Attrs& a) {
  const std::string op = "layer_norm";
  check_attrs(op, a, {"normalized_shape", "eps", "has_weight", "has_bias"});
  if (in.empty()) throw OpError(OpError::Kind::Type, "layer_norm() missing required argument 'input'");
  const TensorType xt = g.value(in[0]).type;
  need_floating(op, xt.dtype);
  const std::vector<int64_t> dims = normalized_dims(op, xt, a);
  const Shape ns = attr_ints(a, "normalized_shape", op);
  const Affine af = affine_operands(op, in, 1, a);
  check_param_shape(g, af.weight, ns, "weight", "normalized_shape");
  check_param_shape(g, af.bias, ns, "bias", "normalized_shape");
  const double eps = float_attr_or(a, "eps", op, 1e-5);
  const DType ct = compute_type(xt.dtype);
  const Normalized n = normalize(g, cast_to(g, in[0], ct), dims, eps);
  return {cast_to(g, apply_affine(g, n.y, af.weight, af.bias), xt.dtype)};
}

double finfo_eps(DType t) {
  switch (t) {
    case DType::Float16:
      return 0.0009765625;
    case DType::BFloat16:
      return 0.0078125;
    case DType::Float64:
      return std::numeric_limits<double>::epsilon();
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

std::vector<int> rms_norm_decompose(Graph& g, const std::vector<int>& in, const Attrs& a) {
  const std::string op = "rms_norm";
  check_attrs(op, a, {"normalized_shape", "eps", "has_weight"});
  if (in.empty()) throw OpError(OpError::Kind::Type, "rms_norm() missing required argument 'input'");
  const TensorType xt = g.value(in[0]).type;
  need_floating(op, xt.dtype);
  const std::vector<int64_t> dims = normalized_dims(op, xt, a);
  const Affine af = affine_operands(op, in, 1, a, /*allow_bias=*/false);
  check_param_shape(g, af.weight, attr_ints(a, "normalized_shape", op), "weight", "normalized_shape");
  const DType ct = compute_type(xt.dtype);
  // torch's default: the eps of the type it computes in (float32 for the half types)
  const double eps = float_attr_or(a, "eps", op, finfo_eps(ct));
  const int xf = cast_to(g, in[0], ct);
  const int ms = g.add("mean", {g.add("mul", {xf, xf})}, red_attrs(dims));
  const int y = g.add("mul", {xf, g.add("rsqrt", {g.add("add", {ms, scalar(g, eps)})})});
  return {cast_to(g, apply_affine(g, y, af.weight, -1), xt.dtype)};
}

// ---- group_norm -----------------------------------------------------------------------------------

std::vector<int> group_norm_decompose(Graph& g, const std::vector<int>& in, const Attrs& a) {
  const std::string op = "group_norm";
  check_attrs(op, a, {"num_groups", "eps", "has_weight", "has_bias"});
  if (in.empty()) throw OpError(OpError::Kind::Type, "group_norm() missing required argument 'input'");
  const TensorType xt = g.value(in[0]).type;
  need_floating(op, xt.dtype);
  if (xt.shape.size() < 2) {
    throw OpError(OpError::Kind::Value,
                  "Expected at least 2 dimensions for input tensor but received " + std::to_string(xt.shape.size()));
  }
  const int64_t G = attr_int(a, "num_groups", op);
  const int64_t N = xt.shape[0], C = xt.shape[1];
  if (G <= 0 || C % G != 0) {
    throw OpError(OpError::Kind::Value,
                  "Expected number of channels in input to be divisible by num_groups, but got "
                  "input of shape " +
                      shape_str(xt.shape) + " and num_groups=" + std::to_string(G));
  }
  const Affine af = affine_operands(op, in, 1, a);
  for (int p : {af.weight, af.bias}) {
    if (p >= 0 && g.value(p).type.shape != Shape{C}) {
      throw OpError(OpError::Kind::Value, std::string("Expected ") + (p == af.weight ? "weight" : "bias") +
                                              " to be a vector of size equal to the number of channels in input, but "
                                              "got " +
                                              (p == af.weight ? "weight" : "bias") + " of shape " +
                                              shape_str(g.value(p).type.shape) + " and input of shape " +
                                              shape_str(xt.shape));
    }
  }
  int64_t hw = 1;
  for (size_t d = 2; d < xt.shape.size(); ++d) hw *= xt.shape[d];
  const double eps = float_attr_or(a, "eps", op, 1e-5);
  const DType ct = compute_type(xt.dtype);
  const int xg = reshape(g, cast_to(g, in[0], ct), {N, G, C / G, hw});
  const Normalized n = normalize(g, xg, {2, 3}, eps);
  const Shape pshape{G, C / G, 1};
  const int w = af.weight >= 0 ? reshape(g, af.weight, pshape) : -1;
  const int b = af.bias >= 0 ? reshape(g, af.bias, pshape) : -1;
  const int y = apply_affine(g, n.y, w, b);
  return {reshape(g, cast_to(g, y, xt.dtype), xt.shape)};
}

// ---- batch_norm -----------------------------------------------------------------------------------

std::vector<int> batch_norm_decompose(Graph& g, const std::vector<int>& in, const Attrs& a) {
  const std::string op = "batch_norm";
  check_attrs(op, a, {"training", "eps", "has_running_stats", "has_weight", "has_bias"});
  if (in.empty()) throw OpError(OpError::Kind::Type, "batch_norm() missing required argument 'input'");
  const TensorType xt = g.value(in[0]).type;
  need_floating(op, xt.dtype);
  const size_t nd = xt.shape.size();
  if (nd < 2) {
    throw OpError(OpError::Kind::Value,
                  "batch_norm(): expected 2D or more input (got " + std::to_string(nd) + "D input)");
  }
  const bool training = bool_attr_or(a, "training", op, false);
  const bool has_stats = bool_attr_or(a, "has_running_stats", op, true);
  if (!has_stats && !training) {
    throw OpError(OpError::Kind::Value, "running_mean and running_var must be defined in evaluation mode");
  }
  const size_t first = has_stats ? 3 : 1;
  if (in.size() < first) {
    throw OpError(OpError::Kind::Type, "batch_norm() takes running_mean and running_var after the input");
  }
  const int64_t C = xt.shape[1];
  const Affine af = affine_operands(op, in, first, a);
  const int rm = has_stats ? in[1] : -1, rv = has_stats ? in[2] : -1;
  for (const auto& [v, name] : {std::pair<int, const char*>{rm, "running_mean"},
                                {rv, "running_var"},
                                {af.weight, "weight"},
                                {af.bias, "bias"}}) {
    if (v >= 0 && numel(g.value(v).type.shape) != C) {
      throw OpError(OpError::Kind::Value, std::string(name) + " should contain " + std::to_string(C) +
                                              " elements not " + std::to_string(numel(g.value(v).type.shape)));
    }
  }
  const double eps = float_attr_or(a, "eps", op, 1e-5);
  const DType ct = compute_type(xt.dtype);
  const int xf = cast_to(g, in[0], ct);
  Shape pshape(nd - 1, 1);  // [C, 1, ..., 1]: broadcasts against x from dim 1
  pshape[0] = C;
  auto param = [&](int v) { return v >= 0 ? reshape(g, v, pshape) : -1; };
  if (!training && rm >= 0) {
    // Folded like torch's CPU kernel: per-channel scale = w / sqrt(var + eps) and shift =
    // b - mean * scale are computed at [C, 1, ...] (a C-element kernel), then y = x * scale + shift
    // is two elementwise ops on x, which fuse into a preceding convolution as per-channel post-ops.
    const int var = cast_to(g, param(rv), ct);
    int scale = g.add("rsqrt", {g.add("add", {var, scalar(g, eps)})});
    if (af.weight >= 0) scale = g.add("mul", {scale, cast_to(g, param(af.weight), ct)});
    int shift = g.add("neg", {g.add("mul", {cast_to(g, param(rm), ct), scale})});
    if (af.bias >= 0) shift = g.add("add", {shift, cast_to(g, param(af.bias), ct)});
    const int y = g.add("add", {g.add("mul", {xf, scale}), shift});
    return {cast_to(g, y, xt.dtype)};
  }
  const int64_t count = numel(xt.shape) / std::max<int64_t>(C, 1);
  if (count <= 1) {
    throw OpError(OpError::Kind::Value,
                  "Expected more than 1 value per channel when training, got input size " + shape_str(xt.shape));
  }
  std::vector<int64_t> dims{0};
  for (size_t d = 2; d < nd; ++d) dims.push_back(static_cast<int64_t>(d));
  const Normalized n = normalize(g, xf, dims, eps);
  const int y = apply_affine(g, n.y, param(af.weight), param(af.bias));
  const int unbiased = g.add("mul", {n.var, scalar(g, static_cast<double>(count) / static_cast<double>(count - 1))});
  return {cast_to(g, y, xt.dtype), reshape(g, n.mean, {C}), reshape(g, unbiased, {C})};
}

void add_composite(const std::string& name, DecomposeFn fn) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Composite;
  d.num_inputs = -1;
  d.decompose = std::move(fn);
  register_builtin(std::move(d));
}

}  // namespace

void register_norm_ops() {
  add_composite("layer_norm", layer_norm_decompose);
  add_composite("rms_norm", rms_norm_decompose);
  add_composite("group_norm", group_norm_decompose);
  add_composite("batch_norm", batch_norm_decompose);
}

}  // namespace flow::dsl

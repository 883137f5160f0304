// Note: more elementwise ops (the ResNet/ViT/Tensor-API set beyond dsl/ops/elementwise.cpp), with
// torch's dtype rules and formulas, operation for operation, so edge values match:
//   - erf/log1p/expm1/sin/cos/reciprocal and C's tan, atan, asin, acos, sinh, cosh, asinh, acosh,
//     atanh, log2, log10, exp2, erfc: ints and bool compute in float32 (torch's int-to-float unary
//     rule); atan2 promotes like true division, hypot takes floats only; floor/ceil/round/trunc/sign/square keep ints
//     (square(bool) is int64, as torch's pow(x, 2)); activations (leaky_relu, elu, softplus, hardswish, hardsigmoid,
//     mish) take floats only ("... not implemented for 'Long'"); hardtanh/relu6 are clamps and keep ints.
//   - round: half to even (Round intrinsic), attr "decimals" as torch (x * 10^d rounded / 10^d).
//   - sign(NaN) = 0 and sign(-0.0) = 0: torch's (0 < x) - (x < 0).
//   - floor_divide / remainder: torch's div_floor / Python-sign remainder formulas for floats
//     (fmod based, exact); for integers floor division and remainder with the divisor's sign.
//     Integer division by zero raises ZeroDivisionError in torch; a kernel cannot raise, so here the
//     divisor 0 is replaced by 1 (documented deviation). fmod is C fmod / C %.
//   - logical_*: nonzero tests in each input's own dtype, result bool; bitwise_not: bool and ints;
//     bitwise_and/or/xor: torch.result_type over ints and bool (logical on bool); bitwise shifts:
//     ints, a count outside [0, bits) as torch (0 for <<, the sign for >>).
//   - isnan/isinf/isfinite: bool; ints are never NaN/inf. nan_to_num(nan=0, posinf, neginf): the
//     defaults are the output dtype's largest/lowest finite values.
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

Expr lit(double v, DType t) {
  if (t == DType::Bool) return make_bool(v != 0);
  if (is_floating(t)) return make_float(v, t);
  return make_int(static_cast<int64_t>(v), t);
}

Expr fn(Intrinsic f, const Expr& x) {
  return call(f, {x});
}

Expr is_nan(const Expr& x) {
  return fn(Intrinsic::IsNan, x);
}

const Attrs& attrs_of(const OpContext& ctx) {
  static const Attrs none;
  return ctx.attrs ? *ctx.attrs : none;
}

double fattr(const OpContext& ctx, const std::string& key, const std::string& op, double fallback) {
  const Attrs& a = attrs_of(ctx);
  return attr_find(a, key) ? attr_float(a, key, op) : fallback;
}

// Output dtype rules of unary ops (throw for unsupported inputs).
using DTypeRule = std::function<DType(const std::string& op, DType in)>;
DType keep_no_bool(const std::string& op, DType t) {
  if (t == DType::Bool) not_implemented_for(op, t);
  return t;
}
DType to_float(const std::string&, DType t) {
  return is_floating(t) ? t : DType::Float32;
}
DType float_only(const std::string& op, DType t) {
  if (!is_floating(t)) not_implemented_for(op, t);
  return t;
}
DType to_bool(const std::string&, DType) {
  return DType::Bool;
}

// A unary op. The input is cast to the output's compute dtype unless `own_dtype` (predicates,
// which look at the input in its own compute dtype).
void add_unary(const std::string& name, DTypeRule rule, std::function<Expr(const Expr&, const OpContext&)> f,
               std::initializer_list<const char*> attrs = {}, bool own_dtype = false,
               std::function<void(const Attrs&)> validate = nullptr) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Elementwise;
  d.num_inputs = 1;
  const std::vector<std::string> allowed(attrs.begin(), attrs.end());
  d.canonicalize = [name, allowed, validate](const Graph&, const std::vector<int>&, const Attrs& a) {
    for (const auto& kv : a) {
      bool ok = false;
      for (const auto& k : allowed) ok = ok || kv.first == k;
      if (!ok) throw OpError(OpError::Kind::Type, name + "(): unexpected attribute '" + kv.first + "'");
      if (!std::holds_alternative<double>(kv.second) && !std::holds_alternative<int64_t>(kv.second)) {
        throw OpError(OpError::Kind::Type, name + "(): attribute '" + kv.first + "' must be a number");
      }
    }
    if (validate) validate(a);
    return a;
  };
  d.infer = [name, rule](const Graph& g, const std::vector<int>& in, const Attrs&) {
    TensorType t = g.value(in[0]).type;
    t.dtype = rule(name, t.dtype);
    return std::vector<TensorType>{t};
  };
  d.compute = [f, own_dtype](const std::vector<Expr>& in, const OpContext& ctx) {
    const Expr x = own_dtype ? in.at(0) : cast(compute_dtype(ctx.outputs.at(0).dtype), in.at(0));
    return f(x, ctx);
  };
  register_builtin(std::move(d));
}

// ---- binary ops ---------------------------------------------------------------------------------

// Arith: torch.result_type; ToFloat: the same, ints and bool computing in float32 (atan2); FloatOnly:
// floating inputs only (hypot: "hypot_cpu" not implemented for 'Long'); Logical: bool; Bitwise:
// torch.result_type over ints and bool ("bitwise_and_cpu" not implemented for 'Float'); Shift: ints
// only ("lshift_cpu" not implemented for 'Bool').
enum class BinaryKind { Arith, ToFloat, FloatOnly, Logical, Bitwise, Shift };

void add_binary(const std::string& name, BinaryKind kind, std::function<Expr(const Expr&, const Expr&)> f) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Elementwise;
  d.num_inputs = 2;
  d.canonicalize = [name](const Graph&, const std::vector<int>&, const Attrs& a) {
    check_attrs(name, a, {});
    return a;
  };
  d.infer = [name, kind](const Graph& g, const std::vector<int>& in, const Attrs&) {
    const Shape shape = broadcast_shapes(g.value(in[0]).type.shape, g.value(in[1]).type.shape);
    DType t = DType::Bool;
    if (kind == BinaryKind::Bitwise || kind == BinaryKind::Shift) {
      t = result_type(g, in);
      const std::string torch_name = name == "bitwise_left_shift"    ? "lshift_cpu"
                                     : name == "bitwise_right_shift" ? "rshift_cpu"
                                                                     : name + "_cpu";
      if (is_floating(t) || (kind == BinaryKind::Shift && t == DType::Bool)) not_implemented_for(torch_name, t);
    } else if (kind != BinaryKind::Logical) {
      t = result_type(g, in);
      if (kind == BinaryKind::ToFloat && !is_floating(t)) t = DType::Float32;
      if (kind == BinaryKind::FloatOnly && !is_floating(t)) not_implemented_for(name + "_cpu", t);
      if (t == DType::Bool) not_implemented_for(name == "floor_divide" ? "div_floor_cpu" : name + "_cpu", t);
    }
    return std::vector<TensorType>{TensorType{shape, t}};
  };
  const bool round_to_half = rounds_operands_to_half(name);
  d.compute = [f, kind, round_to_half](const std::vector<Expr>& in, const OpContext& ctx) {
    if (kind == BinaryKind::Logical) {
      return f(in.at(0) != lit(0, in.at(0).type()), in.at(1) != lit(0, in.at(1).type()));
    }
    const DType common = ctx.outputs.at(0).dtype;
    return f(operand_as(in.at(0), ctx.inputs.at(0).dtype, common, round_to_half),
             operand_as(in.at(1), ctx.inputs.at(1).dtype, common, round_to_half));
  };
  register_builtin(std::move(d));
}

// Integer divisor with 0 replaced by 1 (kernels cannot raise torch's ZeroDivisionError).
Expr safe_divisor(const Expr& b) {
  return select(b == lit(0, b.type()), lit(1, b.type()), b);
}

// torch's div_floor_floating / div_floor_integer.
Expr floor_divide(const Expr& a, const Expr& b) {
  const DType t = a.type();
  const Expr zero = lit(0, t), one = lit(1, t);
  if (!is_floating(t)) {
    const Expr d = safe_divisor(b);
    const Expr q = a / d, r = a % d;
    return select(r != zero && ((r < zero) != (d < zero)), q - one, q);
  }
  const Expr mod = a % b;  // fmod
  Expr div = (a - mod) / b;
  div = select(mod != zero && ((b < zero) != (mod < zero)), div - one, div);
  const Expr fl = fn(Intrinsic::Floor, div);
  const Expr rounded = select(div - fl > lit(0.5, t), fl + one, fl);
  const Expr q = a / b;
  const Expr signed_zero = q * zero;  // copysign(0, a / b): |a / b| < 1 here, so finite
  return select(b == zero, q, select(div != zero, rounded, signed_zero));
}

// Python-style remainder: the result has the divisor's sign.
Expr remainder(const Expr& a, const Expr& b) {
  const DType t = a.type();
  const Expr zero = lit(0, t);
  const Expr d = is_floating(t) ? b : safe_divisor(b);
  const Expr mod = a % d;
  return select(mod != zero && ((d < zero) != (mod < zero)), mod + d, mod);
}

// torch's shifts: a count outside [0, bits) gives 0 for a left shift and the sign fill (a shift by
// bits - 1) for a right shift.
Expr shift_left(const Expr& a, const Expr& b) {
  const DType t = a.type();
  const int64_t bits = t == DType::Int32 ? 32 : 64;
  const Expr out_of_range = b < lit(0, t) || b >= lit(static_cast<double>(bits), t);
  return select(out_of_range, lit(0, t), call(Intrinsic::Shl, {a, select(out_of_range, lit(0, t), b)}));
}

Expr shift_right(const Expr& a, const Expr& b) {
  const DType t = a.type();
  const int64_t bits = t == DType::Int32 ? 32 : 64;
  const Expr out_of_range = b < lit(0, t) || b >= lit(static_cast<double>(bits), t);
  return call(Intrinsic::Shr, {a, select(out_of_range, lit(static_cast<double>(bits - 1), t), b)});
}

Expr fmod(const Expr& a, const Expr& b) {
  return is_floating(a.type()) ? a % b : a % safe_divisor(b);
}

void register_binary() {
  using K = BinaryKind;
  add_binary("floor_divide", K::Arith, floor_divide);
  add_binary("remainder", K::Arith, remainder);
  add_binary("fmod", K::Arith, fmod);
  add_binary("atan2", K::ToFloat, [](const Expr& a, const Expr& b) { return call(Intrinsic::Atan2, {a, b}); });
  add_binary("hypot", K::FloatOnly, [](const Expr& a, const Expr& b) { return call(Intrinsic::Hypot, {a, b}); });
  add_binary("logical_and", K::Logical, [](const Expr& a, const Expr& b) { return a && b; });
  add_binary("logical_or", K::Logical, [](const Expr& a, const Expr& b) { return a || b; });
  add_binary("logical_xor", K::Logical, [](const Expr& a, const Expr& b) { return a != b; });
  // On bool the bitwise ops are the logical ones; on ints the IR's bitwise intrinsics.
  add_binary("bitwise_and", K::Bitwise, [](const Expr& a, const Expr& b) {
    return a.type() == DType::Bool ? (a && b) : call(Intrinsic::BitAnd, {a, b});
  });
  add_binary("bitwise_or", K::Bitwise, [](const Expr& a, const Expr& b) {
    return a.type() == DType::Bool ? (a || b) : call(Intrinsic::BitOr, {a, b});
  });
  add_binary("bitwise_xor", K::Bitwise, [](const Expr& a, const Expr& b) {
    return a.type() == DType::Bool ? (a != b) : call(Intrinsic::BitXor, {a, b});
  });
  add_binary("bitwise_left_shift", K::Shift, shift_left);
  add_binary("bitwise_right_shift", K::Shift, shift_right);
}

// ---- unary math -----------------------------------------------------------------------------------

Expr round_expr(const Expr& x, const OpContext& ctx) {
  const DType t = x.type();
  if (!is_floating(t)) return x;
  const Attrs& a = attrs_of(ctx);
  const int64_t dec = attr_find(a, "decimals") ? attr_int(a, "decimals", "round") : 0;
  if (dec == 0) return fn(Intrinsic::Round, x);
  const Expr ten_pow = lit(std::pow(10.0, static_cast<double>(dec > 0 ? dec : -dec)), t);
  if (dec > 0) return fn(Intrinsic::Round, x * ten_pow) / ten_pow;
  return fn(Intrinsic::Round, x / ten_pow) * ten_pow;
}

Expr softplus(const Expr& x, double beta, double threshold) {
  const DType t = x.type();
  const Expr xb = x * lit(beta, t);
  return select(xb > lit(threshold, t), x, fn(Intrinsic::Log1p, fn(Intrinsic::Exp, xb)) / lit(beta, t));
}

void register_unary() {
  add_unary("erf", to_float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Erf, x); });
  add_unary("log1p", to_float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Log1p, x); });
  add_unary("expm1", to_float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Expm1, x); });
  add_unary("sin", to_float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Sin, x); });
  add_unary("cos", to_float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Cos, x); });
  // C's math functions, one op each (tan, atan, ..., erfc), with the int-to-float unary rule.
  for (const auto& [name, f] : std::vector<std::pair<const char*, Intrinsic>>{{"tan", Intrinsic::Tan},
                                                                              {"atan", Intrinsic::Atan},
                                                                              {"asin", Intrinsic::Asin},
                                                                              {"acos", Intrinsic::Acos},
                                                                              {"sinh", Intrinsic::Sinh},
                                                                              {"cosh", Intrinsic::Cosh},
                                                                              {"asinh", Intrinsic::Asinh},
                                                                              {"acosh", Intrinsic::Acosh},
                                                                              {"atanh", Intrinsic::Atanh},
                                                                              {"log2", Intrinsic::Log2},
                                                                              {"log10", Intrinsic::Log10},
                                                                              {"exp2", Intrinsic::Exp2},
                                                                              {"erfc", Intrinsic::Erfc}}) {
    const Intrinsic g = f;
    add_unary(name, to_float, [g](const Expr& x, const OpContext&) { return fn(g, x); });
  }
  add_unary("reciprocal", to_float, [](const Expr& x, const OpContext&) { return lit(1, x.type()) / x; });
  add_unary("floor", keep_no_bool, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Floor, x); });
  add_unary("ceil", keep_no_bool, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Ceil, x); });
  add_unary("trunc", keep_no_bool,
            [](const Expr& x, const OpContext&) { return is_floating(x.type()) ? fn(Intrinsic::Trunc, x) : x; });
  add_unary("round", keep_no_bool, round_expr, {"decimals"}, false, [](const Attrs& a) {
    if (attr_find(a, "decimals")) attr_int(a, "decimals", "round");  // must be an int
  });
  add_unary(
      "sign", [](const std::string&, DType t) { return t; },
      [](const Expr& x, const OpContext&) {
        const DType t = x.type();
        if (t == DType::Bool) return x;
        const Expr zero = lit(0, t);
        return select(x > zero, lit(1, t), select(x < zero, lit(-1, t), zero));
      });
  add_unary(
      "square", [](const std::string&, DType t) { return t == DType::Bool ? DType::Int64 : t; },
      [](const Expr& x, const OpContext&) { return x * x; });
  add_unary(
      "bitwise_not",
      [](const std::string&, DType t) {
        if (is_floating(t)) not_implemented_for("bitwise_not_cpu", t);
        return t;
      },
      [](const Expr& x, const OpContext&) { return x.type() == DType::Bool ? !x : lit(-1, x.type()) - x; });
  add_unary(
      "logical_not", to_bool, [](const Expr& x, const OpContext&) { return x == lit(0, x.type()); }, {}, true);
  add_unary(
      "isnan", to_bool,
      [](const Expr& x, const OpContext&) { return is_floating(x.type()) ? is_nan(x) : make_bool(false); }, {}, true);
  add_unary(
      "isinf", to_bool,
      [](const Expr& x, const OpContext&) {
        if (!is_floating(x.type())) return make_bool(false);
        return fn(Intrinsic::Abs, x) == lit(std::numeric_limits<double>::infinity(), x.type());
      },
      {}, true);
  add_unary(
      "isfinite", to_bool,
      [](const Expr& x, const OpContext&) {
        if (!is_floating(x.type())) return make_bool(true);
        return fn(Intrinsic::Abs, x) < lit(std::numeric_limits<double>::infinity(), x.type());  // NaN: false
      },
      {}, true);
  add_unary(
      "nan_to_num", [](const std::string&, DType t) { return t; },
      [](const Expr& x, const OpContext& ctx) {
        const DType t = x.type();
        if (!is_floating(t)) return x;
        const DType st = ctx.outputs.at(0).dtype;
        const double big = st == DType::Float16    ? 65504.0
                           : st == DType::BFloat16 ? 3.3895313892515355e38
                           : st == DType::Float32  ? static_cast<double>(std::numeric_limits<float>::max())
                                                   : std::numeric_limits<double>::max();
        const double inf = std::numeric_limits<double>::infinity();
        const Expr r = select(x == lit(inf, t), lit(fattr(ctx, "posinf", "nan_to_num", big), t),
                              select(x == lit(-inf, t), lit(fattr(ctx, "neginf", "nan_to_num", -big), t), x));
        return select(is_nan(x), lit(fattr(ctx, "nan", "nan_to_num", 0.0), t), r);
      },
      {"nan", "posinf", "neginf"});
}

// ---- activations ----------------------------------------------------------------------------------

void register_activations() {
  add_unary("leaky_relu", float_only,
            [](const Expr& x, const OpContext& ctx) {
              const DType t = x.type();
              return select(x > lit(0, t), x, x * lit(fattr(ctx, "negative_slope", "leaky_relu", 0.01), t));
            },
            {"negative_slope"});
  add_unary("elu", float_only,
            [](const Expr& x, const OpContext& ctx) {
              const DType t = x.type();
              const double alpha = fattr(ctx, "alpha", "elu", 1.0);
              const double scale = fattr(ctx, "scale", "elu", 1.0);
              const double input_scale = fattr(ctx, "input_scale", "elu", 1.0);
              const Expr neg = fn(Intrinsic::Expm1, x * lit(input_scale, t)) * lit(alpha * scale, t);
              return select(x > lit(0, t), x * lit(scale, t), neg);
            },
            {"alpha", "scale", "input_scale"});
  // hardtanh = clamp(x, min_val, max_val); NaN stays NaN (IR Min/Max propagate it).
  auto hardtanh = [](const Expr& x, double lo, double hi) {
    const DType t = x.type();
    return min(max(x, lit(lo, t)), lit(hi, t));
  };
  add_unary(
      "hardtanh", keep_no_bool,
      [hardtanh](const Expr& x, const OpContext& ctx) {
        return hardtanh(x, fattr(ctx, "min_val", "hardtanh", -1.0), fattr(ctx, "max_val", "hardtanh", 1.0));
      },
      {"min_val", "max_val"}, false,
      [](const Attrs& a) {
        const double lo = attr_find(a, "min_val") ? attr_float(a, "min_val", "hardtanh") : -1.0;
        const double hi = attr_find(a, "max_val") ? attr_float(a, "max_val", "hardtanh") : 1.0;
        if (lo > hi) throw OpError(OpError::Kind::Value, "min_val cannot be greater than max_val");
      });
  add_unary("relu6", keep_no_bool, [hardtanh](const Expr& x, const OpContext&) { return hardtanh(x, 0.0, 6.0); });
  add_unary("hardsigmoid", float_only, [](const Expr& x, const OpContext&) {
    const DType t = x.type();
    return min(max(x + lit(3, t), lit(0, t)), lit(6, t)) / lit(6, t);
  });
  add_unary("hardswish", float_only, [](const Expr& x, const OpContext&) {
    const DType t = x.type();
    return x * min(max(x + lit(3, t), lit(0, t)), lit(6, t)) / lit(6, t);
  });
  add_unary("softplus", float_only,
            [](const Expr& x, const OpContext& ctx) {
              return softplus(x, fattr(ctx, "beta", "softplus", 1.0), fattr(ctx, "threshold", "softplus", 20.0));
            },
            {"beta", "threshold"});
  add_unary("mish", float_only, [](const Expr& x, const OpContext&) {
    return x * fn(Intrinsic::Tanh, fn(Intrinsic::Log1p, fn(Intrinsic::Exp, x)));
  });
}

}  // namespace

void register_elementwise_more_ops() {
  register_binary();
  register_unary();
  register_activations();
}

}  // namespace flow::dsl

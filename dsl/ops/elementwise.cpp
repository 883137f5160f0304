// Note: the elementwise ops. Each entry's infer follows torch's broadcasting and type promotion
// (result_type over the inputs, wrapped numbers counting by category only); its compute receives
// the inputs in their own compute dtypes and casts them to the op's computation type itself:
// compute_dtype(output dtype) for arithmetic, compute_dtype(result_type(inputs)) for comparisons.
//
// The formulas are torch's, operation for operation, so edge values come out the same:
// relu(NaN) = NaN and relu(-0.0) = -0.0 (select(x < 0, 0, x)); sigmoid = 1 / (1 + exp(-x)) gives 0
// at -inf; silu = x / (1 + exp(-x)) (NaN at -inf, as torch); gelu and its tanh approximation use
// torch's constants and order; minimum/maximum/clamp propagate NaN (the Min/Max nodes are
// fmin/fmax, so NaN is selected explicitly). Dtype errors use torch's wording.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "dsl/graph_interpreter.h"
#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

// A constant of computation type t (bool, int or float32/float64).
Expr lit(double v, DType t) {
  if (t == DType::Bool) return make_bool(v != 0);
  if (is_floating(t)) return make_float(v, t);
  const int64_t i = static_cast<int64_t>(v);
  if (t == DType::Int32 && (i < INT32_MIN || i > INT32_MAX)) return cast(t, make_int(i, DType::Int64));  // wraps
  return make_int(i, t);
}

Expr fn(Intrinsic f, const Expr& x) {
  return call(f, {x});
}

DType out_compute_type(const OpContext& ctx) {
  return compute_dtype(ctx.outputs.at(0).dtype);
}

Shape broadcast_all(const Graph& g, const std::vector<int>& inputs) {
  Shape s = g.value(inputs.at(0)).type.shape;
  for (size_t i = 1; i < inputs.size(); ++i) s = broadcast_shapes(s, g.value(inputs[i]).type.shape);
  return s;
}

// ---- binary ops ---------------------------------------------------------------------------------

enum class BinaryClass { Arith, Div, Compare, MinMax };

std::vector<TensorType> binary_infer(const std::string& name, BinaryClass cls, const Graph& g,
                                     const std::vector<int>& in) {
  const Shape shape = broadcast_all(g, in);
  DType t = result_type(g, in);
  const DType a = g.value(in[0]).type.dtype, b = g.value(in[1]).type.dtype;
  if (name == "sub") {
    if (a == DType::Bool && b == DType::Bool) {
      throw OpError(OpError::Kind::Value,
                    "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                    "`logical_xor()` operator instead.");
    }
    if (a == DType::Bool || b == DType::Bool) {
      throw OpError(OpError::Kind::Value,
                    "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert "
                    "a mask, use the `~` or `logical_not()` operator instead.");
    }
  }
  if (name == "pow" && t == DType::Bool) not_implemented_for("pow", t);
  if (name == "pow" && !is_floating(t)) {
    // torch checks a constant exponent up front (a tensor exponent is only checked on the CPU at
    // run time, which generated kernels cannot do: they compute 1/x**|n| truncated instead).
    const auto& e = g.value(in[1]);
    if (e.kind == ValueKind::Constant && e.scalar < 0)
      throw OpError(OpError::Kind::Value, "Integers to negative integer powers are not allowed.");
  }
  if (cls == BinaryClass::Div && !is_floating(t)) t = DType::Float32;  // true division
  if (cls == BinaryClass::Compare) t = DType::Bool;
  return {TensorType{shape, t}};
}

// add/sub: "alpha" (int or float, default 1) with torch's checks; stored as a float, dropped when 1.
Attrs alpha_canonicalize(const std::string& op, const Graph& g, const std::vector<int>& in, const Attrs& attrs) {
  check_attrs(op, attrs, {"alpha"});
  Attrs out;
  const AttrValue* alpha = attr_find(attrs, "alpha");
  if (!alpha) return out;
  const DType t = result_type(g, in);
  if (std::holds_alternative<double>(*alpha) && !is_floating(t)) {
    throw OpError(OpError::Kind::Value,
                  "For integral input tensors, argument alpha must not be a floating point number.");
  }
  double v = 0;
  if (const bool* b = std::get_if<bool>(alpha)) {
    if (t != DType::Bool) throw OpError(OpError::Kind::Value, "Boolean alpha only supported for Boolean results.");
    v = *b ? 1 : 0;
  } else {
    v = attr_float(attrs, "alpha", op);
  }
  if (v != 1.0) out["alpha"] = v;
  return out;
}

double alpha_of(const OpContext& ctx) {
  return ctx.attrs && attr_find(*ctx.attrs, "alpha") ? attr_float(*ctx.attrs, "alpha", "add") : 1.0;
}

// alpha as torch uses it: rounded to a half result dtype, as the operands are (float16
// add(x, y, alpha=0.3) multiplies by 0.2999267578125).
double half_rounded_alpha(double alpha, const OpContext& ctx) {
  const DType t = ctx.outputs.at(0).dtype;
  return is_half(t) ? round_to_dtype(t, alpha) : alpha;
}

// Integer pow is the IR's integer Pow, torch's powi: repeated multiplication that wraps, and for a
// negative exponent 1, +-1 or 0 (dsl/expr.h).
Expr pow_expr(Expr a, Expr b) {
  return call(Intrinsic::Pow, {std::move(a), std::move(b)});
}

void add_binary(const std::string& name, BinaryClass cls,
                std::function<Expr(const Expr&, const Expr&, const OpContext&)> f) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Elementwise;
  d.num_inputs = 2;
  if (name == "add" || name == "sub") {
    d.canonicalize = [name](const Graph& g, const std::vector<int>& in, const Attrs& a) {
      return alpha_canonicalize(name, g, in, a);
    };
  } else {
    d.canonicalize = [name](const Graph&, const std::vector<int>&, const Attrs& a) {
      check_attrs(name, a, {});
      return a;
    };
  }
  d.infer = [name, cls](const Graph& g, const std::vector<int>& in, const Attrs&) {
    return binary_infer(name, cls, g, in);
  };
  if (name == "pow")  // binary_infer refuses a negative constant exponent of an integer base
    d.scalar_key = [](int input, double value) { return input == 1 && value < 0 ? '-' : '+'; };
  // A half common dtype rounds the other operand first where torch does (rounds_operands_to_half:
  // float16 0.7001953125 > 0.7 is false in torch, 0.7 becoming that same float16); mul and div keep
  // its full value. A small integer common dtype wraps every operand of another dtype, Python
  // numbers included, as torch converts them to it (uint8 x < 300 compares with 44).
  const bool round_to_half = rounds_operands_to_half(name);
  d.compute = [cls, f, round_to_half](const std::vector<Expr>& in, const OpContext& ctx) {
    const DType common =
        cls == BinaryClass::Compare ? result_type(ctx.inputs, ctx.wrapped_number) : ctx.outputs.at(0).dtype;
    const auto operand = [&](size_t i) { return operand_as(in.at(i), ctx.inputs.at(i).dtype, common, round_to_half); };
    return f(operand(0), operand(1), ctx);
  };
  register_builtin(std::move(d));
}

void register_binary_ops() {
  using C = BinaryClass;
  add_binary("add", C::Arith, [](const Expr& a, const Expr& b, const OpContext& ctx) {
    const double alpha = alpha_of(ctx);
    if (a.type() == DType::Bool) return alpha != 0 ? (a || b) : a;
    return alpha == 1.0 ? a + b : a + lit(half_rounded_alpha(alpha, ctx), a.type()) * b;
  });
  add_binary("sub", C::Arith, [](const Expr& a, const Expr& b, const OpContext& ctx) {
    const double alpha = alpha_of(ctx);
    return alpha == 1.0 ? a - b : a - lit(half_rounded_alpha(alpha, ctx), a.type()) * b;
  });
  add_binary("mul", C::Arith,
             [](const Expr& a, const Expr& b, const OpContext&) { return a.type() == DType::Bool ? (a && b) : a * b; });
  add_binary("div", C::Div, [](const Expr& a, const Expr& b, const OpContext&) { return a / b; });
  add_binary("pow", C::Arith, [](const Expr& a, const Expr& b, const OpContext&) { return pow_expr(a, b); });
  // IR Min/Max are torch.minimum/maximum: NaN-propagating, -0 below +0 (dsl/interpreter.cpp).
  add_binary("minimum", C::MinMax, [](const Expr& a, const Expr& b, const OpContext&) { return min(a, b); });
  add_binary("maximum", C::MinMax, [](const Expr& a, const Expr& b, const OpContext&) { return max(a, b); });
  add_binary("eq", C::Compare, [](const Expr& a, const Expr& b, const OpContext&) { return a == b; });
  add_binary("ne", C::Compare, [](const Expr& a, const Expr& b, const OpContext&) { return a != b; });
  add_binary("lt", C::Compare, [](const Expr& a, const Expr& b, const OpContext&) { return a < b; });
  add_binary("le", C::Compare, [](const Expr& a, const Expr& b, const OpContext&) { return a <= b; });
  add_binary("gt", C::Compare, [](const Expr& a, const Expr& b, const OpContext&) { return a > b; });
  add_binary("ge", C::Compare, [](const Expr& a, const Expr& b, const OpContext&) { return a >= b; });
}

// ---- unary ops ----------------------------------------------------------------------------------

enum class UnaryDType {
  Keep,       // the input dtype (neg, abs, relu: ints stay ints)
  Float,      // integers and bool become float32 (exp, log, sigmoid, ...)
  FloatOnly,  // floating inputs only (gelu, silu), as torch's kernels
};

void add_unary(const std::string& name, UnaryDType rule, std::function<Expr(const Expr&, const OpContext&)> f,
               CanonicalizeFn canon = nullptr) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Elementwise;
  d.num_inputs = 1;
  d.canonicalize = std::move(canon);
  if (!d.canonicalize) {
    d.canonicalize = [name](const Graph&, const std::vector<int>&, const Attrs& a) {
      check_attrs(name, a, {});
      return a;
    };
  }
  d.infer = [name, rule](const Graph& g, const std::vector<int>& in, const Attrs&) {
    TensorType t = g.value(in[0]).type;
    if (rule == UnaryDType::Float && !is_floating(t.dtype)) t.dtype = DType::Float32;
    if (rule == UnaryDType::FloatOnly && !is_floating(t.dtype)) not_implemented_for(name, t.dtype);
    if (rule == UnaryDType::Keep && t.dtype == DType::Bool) {
      if (name == "neg") {
        throw OpError(OpError::Kind::Value,
                      "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
                      "mask, use the `~` or `logical_not()` operator instead.");
      }
      if (name == "relu") throw OpError(OpError::Kind::Value, "Boolean inputs not supported for relu");
      not_implemented_for(name, t.dtype);
    }
    return std::vector<TensorType>{t};
  };
  d.compute = [f](const std::vector<Expr>& in, const OpContext& ctx) {
    return f(cast(out_compute_type(ctx), in.at(0)), ctx);
  };
  register_builtin(std::move(d));
}

Expr one_like(const Expr& x) {
  return lit(1, x.type());
}

void register_unary_ops() {
  using U = UnaryDType;
  add_unary("neg", U::Keep, [](const Expr& x, const OpContext&) { return -x; });
  add_unary("abs", U::Keep, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Abs, x); });
  add_unary("relu", U::Keep, [](const Expr& x, const OpContext&) {
    const Expr zero = lit(0, x.type());
    return select(x < zero, zero, x);
  });
  add_unary("exp", U::Float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Exp, x); });
  add_unary("log", U::Float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Log, x); });
  add_unary("sqrt", U::Float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Sqrt, x); });
  add_unary("rsqrt", U::Float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Rsqrt, x); });
  add_unary("tanh", U::Float, [](const Expr& x, const OpContext&) { return fn(Intrinsic::Tanh, x); });
  add_unary("sigmoid", U::Float,
            [](const Expr& x, const OpContext&) { return one_like(x) / (one_like(x) + fn(Intrinsic::Exp, -x)); });
  add_unary("silu", U::FloatOnly,
            [](const Expr& x, const OpContext&) { return x / (one_like(x) + fn(Intrinsic::Exp, -x)); });
  add_unary(
      "gelu", U::FloatOnly,
      [](const Expr& x, const OpContext& ctx) {
        const DType t = x.type();
        const AttrValue* a = ctx.attrs ? attr_find(*ctx.attrs, "approximate") : nullptr;
        if (a && std::get<std::string>(*a) == "tanh") {
          const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5;
          const double kKappa = 0.044715;
          const Expr x_cube = x * x * x;
          const Expr inner = lit(kBeta, t) * (x + lit(kKappa, t) * x_cube);
          return lit(0.5, t) * x * (one_like(x) + fn(Intrinsic::Tanh, inner));
        }
        return x * lit(0.5, t) * (one_like(x) + fn(Intrinsic::Erf, x * lit(M_SQRT1_2, t)));
      },
      [](const Graph&, const std::vector<int>&, const Attrs& a) {
        check_attrs("gelu", a, {"approximate"});
        Attrs out;
        const std::string approx = attr_find(a, "approximate") ? attr_str(a, "approximate", "gelu") : "none";
        if (approx != "none" && approx != "tanh") {
          throw OpError(OpError::Kind::Value, "approximate argument must be either none or tanh.");
        }
        if (approx == "tanh") out["approximate"] = approx;  // "none" is the default: dropped
        return out;
      });
}

// ---- clamp, where, cast ------------------------------------------------------------------------

// clamp's bounds act as wrapped numbers: an int bound keeps an int tensor int, a float bound makes
// it float32, as torch.clamp(x, min=0.5) does.
std::vector<TensorType> clamp_operand_types(const Graph& g, int x, const Attrs& attrs, std::vector<bool>& wrapped) {
  std::vector<TensorType> types{g.value(x).type};
  wrapped = {false};
  for (const char* key : {"min", "max"}) {
    const AttrValue* v = attr_find(attrs, key);
    if (!v) continue;
    const DType t = std::holds_alternative<double>(*v) ? DType::Float64
                    : std::holds_alternative<bool>(*v) ? DType::Bool
                                                       : DType::Int64;
    types.push_back(TensorType{{}, t});
    wrapped.push_back(true);
  }
  return types;
}

double bound_value(const AttrValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

// torch's clamp of an integer tensor by numbers: a bound the dtype cannot hold saturates to its
// range, unless nothing would be left (max below the lowest value, min above the highest), which
// is torch's error.
double clamp_bound(const AttrValue& v, DType t, const char* which) {
  const double b = bound_value(v);
  if (!is_integer(t)) return b;
  // (as doubles: exact for all but int64's ends, which only saturate)
  const auto lo = static_cast<double>(integer_min(t));
  const auto hi = static_cast<double>(integer_max(t));
  const bool is_max = std::string(which) == "max";
  if ((is_max && b < lo) || (!is_max && b > hi)) {
    std::ostringstream msg;
    msg << "Clamp " << which << " value " << b << " is outside the representable range of " << torch_dtype_name(t);
    throw OpError(OpError::Kind::Value, msg.str());  // a RuntimeError in Python, as torch
  }
  return std::clamp(b, lo, hi);
}

void register_clamp_where_cast() {
  OpDef clamp;
  clamp.name = "clamp";
  clamp.pattern = OpPattern::Elementwise;
  clamp.num_inputs = 1;
  clamp.canonicalize = [](const Graph&, const std::vector<int>&, const Attrs& a) {
    check_attrs("clamp", a, {"min", "max"});
    for (const char* key : {"min", "max"}) {
      const AttrValue* v = attr_find(a, key);
      if (v && !std::holds_alternative<double>(*v) && !std::holds_alternative<int64_t>(*v) &&
          !std::holds_alternative<bool>(*v)) {
        throw OpError(OpError::Kind::Type, std::string("clamp(): attribute '") + key + "' must be a number");
      }
    }
    if (!attr_find(a, "min") && !attr_find(a, "max")) {
      throw OpError(OpError::Kind::Value, "torch.clamp: At least one of 'min' or 'max' must not be None");
    }
    return a;
  };
  clamp.infer = [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    std::vector<bool> wrapped;
    const std::vector<TensorType> types = clamp_operand_types(g, in[0], a, wrapped);
    const DType t = result_type(types, wrapped);
    if (t == DType::Bool) not_implemented_for(attr_find(a, "min") ? "clamp_min_scalar_cpu" : "clamp_max_scalar_cpu", t);
    if (const AttrValue* hi = attr_find(a, "max")) clamp_bound(*hi, t, "max");
    if (const AttrValue* lo = attr_find(a, "min")) clamp_bound(*lo, t, "min");
    return std::vector<TensorType>{TensorType{g.value(in[0]).type.shape, t}};
  };
  clamp.compute = [](const std::vector<Expr>& in, const OpContext& ctx) {
    const DType ct = out_compute_type(ctx);
    const Expr x = cast(ct, in.at(0));
    Expr r = x;
    const Attrs none;
    const Attrs& attrs = ctx.attrs ? *ctx.attrs : none;
    const DType out = ctx.outputs.at(0).dtype;
    if (const AttrValue* lo = attr_find(attrs, "min")) r = max(r, lit(clamp_bound(*lo, out, "min"), ct));
    if (const AttrValue* hi = attr_find(attrs, "max")) r = min(r, lit(clamp_bound(*hi, out, "max"), ct));
    return r;  // a NaN x stays NaN: IR Min/Max propagate NaN
  };
  register_builtin(std::move(clamp));

  OpDef where;
  where.name = "where";
  where.pattern = OpPattern::Elementwise;
  where.num_inputs = 3;
  where.canonicalize = [](const Graph&, const std::vector<int>&, const Attrs& a) {
    check_attrs("where", a, {});
    return a;
  };
  where.infer = [](const Graph& g, const std::vector<int>& in, const Attrs&) {
    const DType c = g.value(in[0]).type.dtype;
    if (c != DType::Bool) {
      throw OpError(OpError::Kind::Value, std::string("where expected condition to be a boolean tensor, but got a "
                                                      "tensor with dtype ") +
                                              torch_dtype_name(c));
    }
    const Shape shape = broadcast_all(g, in);
    return std::vector<TensorType>{TensorType{shape, result_type(g, {in[1], in[2]})}};
  };
  where.compute = [](const std::vector<Expr>& in, const OpContext& ctx) {
    const DType ct = out_compute_type(ctx);
    return select(in.at(0), cast(ct, in.at(1)), cast(ct, in.at(2)));
  };
  register_builtin(std::move(where));

  OpDef cast_op;
  cast_op.name = "cast";
  cast_op.pattern = OpPattern::Elementwise;
  cast_op.num_inputs = 1;
  cast_op.canonicalize = [](const Graph&, const std::vector<int>&, const Attrs& a) {
    return canonical_dtype_attrs("cast", a);
  };
  cast_op.infer = [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    return std::vector<TensorType>{TensorType{g.value(in[0]).type.shape, attr_dtype(a, "dtype", "cast")}};
  };
  cast_op.compute = [](const std::vector<Expr>& in, const OpContext& ctx) {
    const Expr& x = in.at(0);
    const DType ct = out_compute_type(ctx);
    // To bool: nonzero (NaN is true), spelled out so no backend's float->bool conversion matters.
    if (ct == DType::Bool && x.type() != DType::Bool) return x != lit(0, x.type());
    return cast(ct, x);
  };
  register_builtin(std::move(cast_op));
}

}  // namespace

void register_elementwise_ops() {
  register_binary_ops();
  register_unary_ops();
  register_clamp_where_cast();
}

}  // namespace flow::dsl

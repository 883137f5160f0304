// Note: expression builders. They construct exactly the node asked for (no folding: that is the
// simplifier's job) after checking types, so construction stays a type check plus make_shared.
// Decisions the header leaves open:
//  - Integer literals: an Int64 IntImm meeting an Int32 expression becomes an Int32 IntImm (it must
//    fit, else std::invalid_argument). Integer literals never adapt to floating types.
//  - make_int checks the value fits the type (Int32 range; Bool 0 or 1). make_float(v, Float32)
//    stores v rounded to float, so equal constants compare and hash equal.
//  - Arithmetic (+ - * / % min max) takes Int32, Int64, Float32 or Float64 (min/max also Bool).
//    Float % is fmod (truncating, like the integer rule). Float min/max are torch.minimum/maximum:
//    a NaN operand gives NaN, and -0.0 < +0.0 (the interpreter and both backends implement this).
//  - Comparisons take any non-half type; And/Or/Not take Bool. Load indices are Int32 or Int64.
//  - make_zero/make_one of a half type return Cast(half, float32 constant).
#include "dsl/expr.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace flow::dsl {

const char* expr_kind_name(ExprKind k) {
  switch (k) {
#define FLOW_X(name)   \
  case ExprKind::name: \
    return #name;
    FLOW_FOR_EACH_EXPR(FLOW_X)
#undef FLOW_X
  }
  return "<invalid expr kind>";
}

const char* intrinsic_name(Intrinsic f) {
  switch (f) {
    case Intrinsic::Neg:
      return "neg";
    case Intrinsic::Abs:
      return "abs";
    case Intrinsic::Exp:
      return "exp";
    case Intrinsic::Log:
      return "log";
    case Intrinsic::Sqrt:
      return "sqrt";
    case Intrinsic::Rsqrt:
      return "rsqrt";
    case Intrinsic::Tanh:
      return "tanh";
    case Intrinsic::Erf:
      return "erf";
    case Intrinsic::Pow:
      return "pow";
    case Intrinsic::Floor:
      return "floor";
    case Intrinsic::Ceil:
      return "ceil";
    case Intrinsic::IsNan:
      return "is_nan";
    case Intrinsic::Sin:
      return "sin";
    case Intrinsic::Cos:
      return "cos";
    case Intrinsic::Log1p:
      return "log1p";
    case Intrinsic::Expm1:
      return "expm1";
    case Intrinsic::Trunc:
      return "trunc";
    case Intrinsic::Round:
      return "round";
    case Intrinsic::Tan:
      return "tan";
    case Intrinsic::Atan:
      return "atan";
    case Intrinsic::Asin:
      return "asin";
    case Intrinsic::Acos:
      return "acos";
    case Intrinsic::Sinh:
      return "sinh";
    case Intrinsic::Cosh:
      return "cosh";
    case Intrinsic::Asinh:
      return "asinh";
    case Intrinsic::Acosh:
      return "acosh";
    case Intrinsic::Atanh:
      return "atanh";
    case Intrinsic::Log2:
      return "log2";
    case Intrinsic::Log10:
      return "log10";
    case Intrinsic::Exp2:
      return "exp2";
    case Intrinsic::Erfc:
      return "erfc";
    case Intrinsic::Atan2:
      return "atan2";
    case Intrinsic::Hypot:
      return "hypot";
    case Intrinsic::BitAnd:
      return "bit_and";
    case Intrinsic::BitOr:
      return "bit_or";
    case Intrinsic::BitXor:
      return "bit_xor";
    case Intrinsic::Shl:
      return "shl";
    case Intrinsic::Shr:
      return "shr";
    case Intrinsic::CheckIndex:
      return "check_index";
  }
  return "<invalid intrinsic>";
}

bool is_bitwise_intrinsic(Intrinsic f) {
  return f == Intrinsic::BitAnd || f == Intrinsic::BitOr || f == Intrinsic::BitXor || f == Intrinsic::Shl ||
         f == Intrinsic::Shr;
}

int intrinsic_arity(Intrinsic f) {
  if (f == Intrinsic::CheckIndex) return 4;
  return f == Intrinsic::Pow || f == Intrinsic::Atan2 || f == Intrinsic::Hypot || is_bitwise_intrinsic(f) ? 2 : 1;
}

namespace {

[[noreturn]] void type_error(const char* what, const Expr& a, const Expr& b) {
  throw std::invalid_argument(std::string(what) + ": mismatched operand types " + dtype_name(a.type()) + " and " +
                              dtype_name(b.type()));
}
[[noreturn]] void type_error1(const char* what, DType t, const char* expected) {
  throw std::invalid_argument(std::string(what) + ": operand of type " + dtype_name(t) + ", expected " + expected);
}

void check_defined(const char* what, const Expr& e) {
  if (!e.defined()) throw std::invalid_argument(std::string(what) + ": undefined operand");
}

bool is_int64_literal(const Expr& e) {
  const IntImm* imm = e.as<IntImm>();
  return imm && imm->type == DType::Int64;
}

Expr adapt_literal_to(const Expr& lit, DType t) {
  const int64_t v = lit.as<IntImm>()->value;
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("integer literal " + std::to_string(v) + " does not fit int32");
  }
  return Expr(std::make_shared<const IntImm>(t, v));
}

// Applies the literal rule and requires equal types afterwards.
void unify(const char* what, Expr& a, Expr& b) {
  check_defined(what, a);
  check_defined(what, b);
  if (a.type() == b.type()) return;
  if (b.type() == DType::Int32 && is_int64_literal(a)) {
    a = adapt_literal_to(a, DType::Int32);
  } else if (a.type() == DType::Int32 && is_int64_literal(b)) {
    b = adapt_literal_to(b, DType::Int32);
  } else {
    type_error(what, a, b);
  }
}

bool is_arith(DType t) {
  return t == DType::Int32 || t == DType::Int64 || t == DType::Float32 || t == DType::Float64;
}

template <class Node>
Expr make_arith(const char* what, Expr a, Expr b, bool allow_bool = false) {
  unify(what, a, b);
  const DType t = a.type();
  if (!is_arith(t) && !(allow_bool && t == DType::Bool)) type_error1(what, t, "int32, int64, float32 or float64");
  return Expr(std::make_shared<const Node>(t, std::move(a), std::move(b)));
}

template <class Node>
Expr make_cmp(const char* what, Expr a, Expr b) {
  unify(what, a, b);
  if (is_storage_only(a.type()))
    type_error1(what, a.type(), "a compute type (cast half types to float32 and small ints to int32 first)");
  return Expr(std::make_shared<const Node>(DType::Bool, std::move(a), std::move(b)));
}

template <class Node>
Expr make_logic(const char* what, Expr a, Expr b) {
  check_defined(what, a);
  check_defined(what, b);
  if (a.type() != DType::Bool) type_error1(what, a.type(), "bool");
  if (b.type() != DType::Bool) type_error1(what, b.type(), "bool");
  return Expr(std::make_shared<const Node>(DType::Bool, std::move(a), std::move(b)));
}

}  // namespace

Expr::Expr(int64_t v) : node_(std::make_shared<const IntImm>(DType::Int64, v)) {}
Expr::Expr(int v) : node_(std::make_shared<const IntImm>(DType::Int64, v)) {}

Expr make_int(int64_t v, DType t) {
  switch (t) {
    case DType::Bool:
      if (v != 0 && v != 1)
        throw std::invalid_argument("make_int: bool constant must be 0 or 1, got " + std::to_string(v));
      break;
    case DType::Int32:
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        throw std::invalid_argument("make_int: " + std::to_string(v) + " does not fit int32");
      }
      break;
    case DType::Int64:
      break;
    default:
      type_error1("make_int", t, "bool, int32 or int64");
  }
  return Expr(std::make_shared<const IntImm>(t, v));
}

Expr make_float(double v, DType t) {
  if (t == DType::Float32) return Expr(std::make_shared<const FloatImm>(t, static_cast<double>(static_cast<float>(v))));
  if (t == DType::Float64) return Expr(std::make_shared<const FloatImm>(t, v));
  type_error1("make_float", t, "float32 or float64 (half constants: cast a float32 constant)");
}

Expr make_bool(bool v) {
  return Expr(std::make_shared<const IntImm>(DType::Bool, v ? 1 : 0));
}

Expr make_zero(DType t) {
  if (is_storage_only(t)) return cast(t, make_zero(compute_dtype(t)));
  return is_floating(t) ? make_float(0.0, t) : make_int(0, t);
}

Expr make_one(DType t) {
  if (is_storage_only(t)) return cast(t, make_one(compute_dtype(t)));
  return is_floating(t) ? make_float(1.0, t) : make_int(1, t);
}

Expr var(const std::string& name, DType t) {
  if (name.empty()) throw std::invalid_argument("var: empty name");
  return Expr(std::make_shared<const Var>(t, name));
}

Expr cast(DType t, Expr v) {
  check_defined("cast", v);
  if (v.type() == t) return v;
  return Expr(std::make_shared<const Cast>(t, std::move(v)));
}

Expr reinterpret(DType t, Expr v) {
  check_defined("reinterpret", v);
  if (v.type() == t) return v;
  if (t == DType::Bool || v.type() == DType::Bool || dtype_size(t) != dtype_size(v.type())) {
    throw std::invalid_argument(std::string("reinterpret: cannot read the bits of ") + dtype_name(v.type()) + " as " +
                                dtype_name(t));
  }
  return Expr(std::make_shared<const Reinterpret>(t, std::move(v)));
}

Expr load(DType t, const std::string& buffer, Expr index) {
  check_defined("load", index);
  if (buffer.empty()) throw std::invalid_argument("load: empty buffer name");
  if (!is_integral(index.type())) type_error1("load index", index.type(), "int32 or int64");
  return Expr(std::make_shared<const Load>(t, buffer, std::move(index)));
}

Expr select(Expr c, Expr t, Expr f) {
  check_defined("select", c);
  if (c.type() != DType::Bool) type_error1("select condition", c.type(), "bool");
  unify("select", t, f);
  return Expr(std::make_shared<const Select>(std::move(c), std::move(t), std::move(f)));
}

Expr call(Intrinsic f, std::vector<Expr> args) {
  const int arity = intrinsic_arity(f);
  if (static_cast<int>(args.size()) != arity) {
    throw std::invalid_argument(std::string("call ") + intrinsic_name(f) + ": expected " + std::to_string(arity) +
                                " arguments, got " + std::to_string(args.size()));
  }
  for (const Expr& a : args) check_defined(intrinsic_name(f), a);
  if (arity == 2) unify(intrinsic_name(f), args[0], args[1]);
  const DType t = args[0].type();
  if (f == Intrinsic::CheckIndex) {
    for (const Expr& a : args)
      if (a.type() != DType::Int64) type_error1(intrinsic_name(f), a.type(), "int64");
    return Expr(std::make_shared<const Call>(t, f, std::move(args)));
  }
  if (is_bitwise_intrinsic(f)) {
    if (t != DType::Int32 && t != DType::Int64) type_error1(intrinsic_name(f), t, "int32 or int64");
    return Expr(std::make_shared<const Call>(t, f, std::move(args)));
  }
  const bool int_ok = f == Intrinsic::Neg || f == Intrinsic::Abs || f == Intrinsic::Floor || f == Intrinsic::Ceil ||
                      f == Intrinsic::Pow;
  const bool ok = t == DType::Float32 || t == DType::Float64 || (int_ok && is_integral(t));
  if (!ok) type_error1(intrinsic_name(f), t, int_ok ? "int32, int64, float32 or float64" : "float32 or float64");
  const DType rt = f == Intrinsic::IsNan ? DType::Bool : t;
  return Expr(std::make_shared<const Call>(rt, f, std::move(args)));
}

Expr check_index(Expr i, int64_t lo, int64_t hi, int64_t dim, bool as_runtime_error) {
  const int64_t tagged = as_runtime_error ? dim | kCheckIndexRuntimeError : dim;
  return call(Intrinsic::CheckIndex, {std::move(i), make_int(lo), make_int(hi), make_int(tagged)});
}

Expr min(Expr a, Expr b) {
  return make_arith<Min>("min", std::move(a), std::move(b), true);
}
Expr max(Expr a, Expr b) {
  return make_arith<Max>("max", std::move(a), std::move(b), true);
}
Expr operator+(Expr a, Expr b) {
  return make_arith<Add>("+", std::move(a), std::move(b));
}
Expr operator-(Expr a, Expr b) {
  return make_arith<Sub>("-", std::move(a), std::move(b));
}
Expr operator*(Expr a, Expr b) {
  return make_arith<Mul>("*", std::move(a), std::move(b));
}
Expr operator/(Expr a, Expr b) {
  return make_arith<Div>("/", std::move(a), std::move(b));
}
Expr operator%(Expr a, Expr b) {
  return make_arith<Mod>("%", std::move(a), std::move(b));
}
Expr operator-(Expr a) {
  return call(Intrinsic::Neg, {std::move(a)});
}
Expr operator==(Expr a, Expr b) {
  return make_cmp<EQ>("==", std::move(a), std::move(b));
}
Expr operator!=(Expr a, Expr b) {
  return make_cmp<NE>("!=", std::move(a), std::move(b));
}
Expr operator<(Expr a, Expr b) {
  return make_cmp<LT>("<", std::move(a), std::move(b));
}
Expr operator<=(Expr a, Expr b) {
  return make_cmp<LE>("<=", std::move(a), std::move(b));
}
Expr operator>(Expr a, Expr b) {
  return make_cmp<GT>(">", std::move(a), std::move(b));
}
Expr operator>=(Expr a, Expr b) {
  return make_cmp<GE>(">=", std::move(a), std::move(b));
}
Expr operator&&(Expr a, Expr b) {
  return make_logic<And>("&&", std::move(a), std::move(b));
}
Expr operator||(Expr a, Expr b) {
  return make_logic<Or>("||", std::move(a), std::move(b));
}
Expr operator!(Expr a) {
  check_defined("!", a);
  if (a.type() != DType::Bool) type_error1("!", a.type(), "bool");
  return Expr(std::make_shared<const Not>(std::move(a)));
}

Expr make_binary(ExprKind k, Expr a, Expr b) {
  switch (k) {
    case ExprKind::Add:
      return std::move(a) + std::move(b);
    case ExprKind::Sub:
      return std::move(a) - std::move(b);
    case ExprKind::Mul:
      return std::move(a) * std::move(b);
    case ExprKind::Div:
      return std::move(a) / std::move(b);
    case ExprKind::Mod:
      return std::move(a) % std::move(b);
    case ExprKind::Min:
      return min(std::move(a), std::move(b));
    case ExprKind::Max:
      return max(std::move(a), std::move(b));
    case ExprKind::EQ:
      return std::move(a) == std::move(b);
    case ExprKind::NE:
      return std::move(a) != std::move(b);
    case ExprKind::LT:
      return std::move(a) < std::move(b);
    case ExprKind::LE:
      return std::move(a) <= std::move(b);
    case ExprKind::GT:
      return std::move(a) > std::move(b);
    case ExprKind::GE:
      return std::move(a) >= std::move(b);
    case ExprKind::And:
      return std::move(a) && std::move(b);
    case ExprKind::Or:
      return std::move(a) || std::move(b);
    default:
      break;
  }
  throw std::invalid_argument(std::string("make_binary: ") + expr_kind_name(k) + " is not a binary kind");
}

const int64_t* as_const_int(const Expr& e) {
  const IntImm* imm = e.as<IntImm>();
  return imm ? &imm->value : nullptr;
}

const double* as_const_float(const Expr& e) {
  const FloatImm* imm = e.as<FloatImm>();
  return imm ? &imm->value : nullptr;
}

bool is_const_int(const Expr& e, int64_t v) {
  const int64_t* c = as_const_int(e);
  return c && *c == v;
}

}  // namespace flow::dsl

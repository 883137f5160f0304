// Note: the expression IR. Nodes are immutable and shared (std::shared_ptr); one X-macro list of
// node kinds below generates the kind enum, the visitor, the mutator, the printer, the serializer
// and structural equality, so adding a node means adding it to the list and to each switch the
// compiler then points at. Type tests go by tag: `e.as<Add>()`, never dynamic_cast.
//
// Semantics: every Expr has a scalar DType. Integer Div and Mod truncate toward zero (C rules);
// index arithmetic is non-negative so the distinction does not arise there. Comparisons, And, Or
// and Not produce Bool. Arithmetic on Float16/BFloat16 never appears: they are only loaded, stored
// and cast.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsl/types.h"

namespace flow::dsl {

#define FLOW_FOR_EACH_EXPR(X) \
  X(IntImm)                   \
  X(FloatImm)                 \
  X(Var)                      \
  X(Cast)                     \
  X(Add)                      \
  X(Sub)                      \
  X(Mul)                      \
  X(Div)                      \
  X(Mod)                      \
  X(Min)                      \
  X(Max)                      \
  X(EQ)                       \
  X(NE)                       \
  X(LT)                       \
  X(LE)                       \
  X(GT)                       \
  X(GE)                       \
  X(And)                      \
  X(Or)                       \
  X(Not)                      \
  X(Select)                   \
  X(Load)                     \
  X(Call)                     \
  X(Reinterpret)

enum class ExprKind : uint8_t {
#define FLOW_X(name) name,
  FLOW_FOR_EACH_EXPR(FLOW_X)
#undef FLOW_X
};
const char* expr_kind_name(ExprKind k);

struct ExprNode {
  ExprNode(ExprKind k, DType t) : kind(k), type(t) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DType type;
};

// A shared handle to an immutable expression node (null when default-constructed).
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}
  // Implicit conversions from C++ scalars make index math readable: `i * 4 + 1`.
  Expr(int64_t v);  // NOLINT: IntImm of Int64
  Expr(int v);      // NOLINT: IntImm of Int64
  // No implicit floating constructor: write make_float(v, type) so the type is always chosen.

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  ExprKind kind() const { return node_->kind; }
  DType type() const { return node_->type; }
  bool same_as(const Expr& o) const { return node_ == o.node_; }

  template <class T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const ExprNode> node_;
};

// ---- node definitions -------------------------------------------------------------------------

struct IntImm : ExprNode {  // Bool, Int32 or Int64
  static constexpr ExprKind kKind = ExprKind::IntImm;
  IntImm(DType t, int64_t v) : ExprNode(kKind, t), value(v) {}
  const int64_t value;
};

struct FloatImm : ExprNode {  // Float32 or Float64
  static constexpr ExprKind kKind = ExprKind::FloatImm;
  FloatImm(DType t, double v) : ExprNode(kKind, t), value(v) {}
  const double value;
};

// A named scalar: a loop variable, a Let binding or a scalar kernel parameter.
struct Var : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Var;
  Var(DType t, std::string n) : ExprNode(kKind, t), name(std::move(n)) {}
  const std::string name;
};

struct Cast : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Cast;
  Cast(DType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  const Expr value;
};

// Binary nodes share one layout; the macro keeps the list of them in one place.
struct BinaryNode : ExprNode {
  BinaryNode(ExprKind k, DType t, Expr x, Expr y) : ExprNode(k, t), a(std::move(x)), b(std::move(y)) {}
  const Expr a, b;
};
#define FLOW_FOR_EACH_BINARY(X) \
  X(Add) X(Sub) X(Mul) X(Div) X(Mod) X(Min) X(Max) X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE) X(And) X(Or)
#define FLOW_X(name)                                                                    \
  struct name : BinaryNode {                                                            \
    static constexpr ExprKind kKind = ExprKind::name;                                   \
    name(DType t, Expr x, Expr y) : BinaryNode(kKind, t, std::move(x), std::move(y)) {} \
  };
FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X

struct Not : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Not;
  explicit Not(Expr v) : ExprNode(kKind, DType::Bool), a(std::move(v)) {}
  const Expr a;
};

struct Select : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Select;
  Select(Expr c, Expr t, Expr f)
      : ExprNode(kKind, t.type()), cond(std::move(c)), true_value(std::move(t)), false_value(std::move(f)) {}
  const Expr cond, true_value, false_value;
};

// Reads element `index` (in elements, Int64) of a buffer; the node's type is the buffer's dtype.
struct Load : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Load;
  Load(DType t, std::string buf, Expr i) : ExprNode(kKind, t), buffer(std::move(buf)), index(std::move(i)) {}
  const std::string buffer;
  const Expr index;
};

// The bits of `value` read as another type of the same size (C++20's std::bit_cast; torch's
// Tensor.view(dtype)): float32 <-> int32, float64 <-> int64, float16/bfloat16 <-> int16, uint8 <->
// int8. Bool takes no part: its bytes are 0 or 1 only, so the ops convert it by value. Last in the
// kind list so that serialized kernels keep their tags.
struct Reinterpret : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Reinterpret;
  Reinterpret(DType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  const Expr value;
};

// Pure math functions. Arguments and result share one floating type (Float32 or Float64), except
// Abs/Neg/Floor/Ceil/Pow which also take integers. Pow of integers is torch's powi: multiplication
// by squaring that wraps in the type; a negative exponent gives 1 for a base of 1, +-1 for -1 (by
// the exponent's parity) and 0 otherwise. Round rounds half to even (rint / nearbyint in the
// default rounding mode); Trunc rounds toward zero. Pow, Atan2 and Hypot take two arguments; the
// functions from Tan on are C's (tanf/tan, ..., atan2f/atan2) on every backend.
// The bitwise functions take two integers of one type (Int32 or Int64): BitAnd, BitOr, BitXor, and
// the shifts Shl (of the two's-complement bits, as unsigned) and Shr (arithmetic), defined only for
// a shift count in [0, bits): the ops clamp it first (dsl/ops/elementwise_more.cpp).
#define FLOW_FOR_EACH_INTRINSIC(X)                                                                                  \
  X(Neg)                                                                                                            \
  X(Abs)                                                                                                            \
  X(Exp)                                                                                                            \
  X(Log)                                                                                                            \
  X(Sqrt)                                                                                                           \
  X(Rsqrt) X(Tanh) X(Erf) X(Pow) X(Floor) X(Ceil) X(IsNan) X(Sin) X(Cos) X(Log1p) X(Expm1) X(Trunc) X(Round) X(Tan) \
      X(Atan) X(Asin) X(Acos) X(Sinh) X(Cosh) X(Asinh) X(Acosh) X(Atanh) X(Log2) X(Log10) X(Exp2) X(Erfc) X(Atan2)  \
          X(Hypot) X(BitAnd) X(BitOr) X(BitXor) X(Shl) X(Shr) X(CheckIndex)
enum class Intrinsic : uint8_t {
#define FLOW_X(name) name,
  FLOW_FOR_EACH_INTRINSIC(FLOW_X)
#undef FLOW_X
};
const char* intrinsic_name(Intrinsic f);  // "exp", "is_nan", ...
int intrinsic_arity(Intrinsic f);
bool is_bitwise_intrinsic(Intrinsic f);  // BitAnd .. Shr: integer arguments only

// CheckIndex(i, lo, hi, dim) is i itself, Int64, with a side effect: an i outside [lo, hi) is an
// index out of bounds (along dimension `dim` of size hi), which the interpreter raises and the
// generated kernels report into an error word (runtime/device_error.h) for the host to raise after
// the launch. The ops that read at loaded indices (index_select, gather, embedding) wrap it. The
// code generators never speculate it; the simplifier folds it for a constant in range and may drop
// one whose value is unused (a report missed, never a false one).
struct Call : ExprNode {  // IsNan returns Bool
  static constexpr ExprKind kKind = ExprKind::Call;
  Call(DType t, Intrinsic f, std::vector<Expr> a) : ExprNode(kKind, t), func(f), args(std::move(a)) {}
  const Intrinsic func;
  const std::vector<Expr> args;
};

// ---- builders (type-checked; throw std::invalid_argument on mismatched types) -----------------
// Binary builders require both sides to have the same type; integer literals adapt to the other
// side's integer type (so `i + 1` works for Int32 and Int64 vars).

Expr make_int(int64_t v, DType t = DType::Int64);
Expr make_float(double v, DType t = DType::Float32);
Expr make_bool(bool v);
Expr make_zero(DType t);
Expr make_one(DType t);
Expr var(const std::string& name, DType t = DType::Int64);
Expr cast(DType t, Expr v);  // no-op when the type already matches
// The bits of v as type t (same storage size, neither bool); no-op when the type already matches.
Expr reinterpret(DType t, Expr v);
Expr load(DType t, const std::string& buffer, Expr index);
Expr select(Expr c, Expr t, Expr f);
Expr call(Intrinsic f, std::vector<Expr> args);
// call(CheckIndex, ...) on an Int64 index. A report raises IndexError, as torch's index_select,
// embedding and indexing do, or with as_runtime_error RuntimeError, as torch.gather does: the choice
// travels in the dim argument (kCheckIndexRuntimeError set), so the error word needs no more room.
Expr check_index(Expr i, int64_t lo, int64_t hi, int64_t dim, bool as_runtime_error = false);
constexpr int64_t kCheckIndexRuntimeError = int64_t{1} << 40;
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);  // Neg
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
// Generic binary builder by kind (used by the mutator and deserializer).
Expr make_binary(ExprKind k, Expr a, Expr b);

// Constant inspection helpers.
const int64_t* as_const_int(const Expr& e);
const double* as_const_float(const Expr& e);
bool is_const_int(const Expr& e, int64_t v);

}  // namespace flow::dsl

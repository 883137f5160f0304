// Note: the reference interpreter. Everything runs through one executor over a *group* of threads
// with an active mask: CPU code (and GPU code outside the GPUThread loops) is a group of one
// thread; a GPUThread loop (or a chain of directly nested ones) makes a group of one block's
// threads that runs its body statement by statement in lockstep (SIMT). Each thread has its own
// variable and buffer scope stacks; Shared scratch memory is one storage that every thread's scope
// points at, Local scratch is one storage per thread. Local buffers declared outside the thread
// loop are copied into each thread on entry (each CUDA thread has run that prefix redundantly) and
// the copies are discarded on exit.
//
// Values are Scalars: integers in `i` (always within the dtype's range), floating values in `f`
// as a double that is exactly representable in the dtype unless InterpOptions::float64_math. A
// float32 op is computed in double and rounded to float, which is bit-exact IEEE float32 for
// + - * / and sqrt (double has more than 2*24+2 bits). Scratch memory holds Scalars, so in oracle
// mode it keeps full double precision; only Stores into caller memory round to the storage type.
#include "dsl/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include "dsl/graph.h"

namespace flow::dsl {

namespace {

[[noreturn]] void fail(const std::string& msg) {
  throw std::runtime_error("interpret: " + msg);
}

// ---- float16 / bfloat16 ------------------------------------------------------------------------

struct SmallFloat {
  int exp_bits;
  int mant_bits;
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint32_t exp_all_ones() const { return (1u << exp_bits) - 1; }
};
constexpr SmallFloat kHalf{5, 10};
constexpr SmallFloat kBF16{8, 7};

// A NaN with the given sign and payload (the payload's leading bits are kept).
uint16_t small_nan(bool negative, uint64_t payload_top_bits, SmallFloat fmt) {
  const uint32_t payload = payload_top_bits ? static_cast<uint32_t>(payload_top_bits) : 1u << (fmt.mant_bits - 1);
  return static_cast<uint16_t>((negative ? 0x8000u : 0u) | (fmt.exp_all_ones() << fmt.mant_bits) | payload);
}

// Rounds a double to the format, round-to-nearest-even, with subnormals and overflow to infinity.
// Direct from double, so a float64 value is rounded once.
uint16_t double_to_small(double d, SmallFloat fmt) {
  const int m = fmt.mant_bits;
  if (std::isnan(d)) {
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    return small_nan(std::signbit(d), (bits & ((uint64_t{1} << 52) - 1)) >> (52 - m), fmt);
  }
  const uint32_t sign = std::signbit(d) ? 0x8000u : 0u;
  const uint32_t inf = sign | (fmt.exp_all_ones() << m);
  const double a = std::fabs(d);
  if (a == 0) return static_cast<uint16_t>(sign);
  if (std::isinf(a)) return static_cast<uint16_t>(inf);
  int e = 0;
  std::frexp(a, &e);
  const int exponent = e - 1;  // a = 1.xxx * 2^exponent
  const int emin = 1 - fmt.bias();
  if (exponent > fmt.bias()) return static_cast<uint16_t>(inf);
  // Scale so that one unit in the last place of the result is 1 (exact: a power-of-two scaling).
  const int ulp_exp = std::max(exponent, emin) - m;
  const double q = std::ldexp(a, -ulp_exp);
  double r = std::floor(q);
  const double frac = q - r;  // exact
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  const auto ir = static_cast<uint32_t>(r);
  // Subnormal: the mantissa field is ir (ir == 2^m carries into the smallest normal). Normal: ir is
  // in [2^m, 2^(m+1)]; a carry to 2^(m+1) moves into the exponent field by the addition.
  const uint32_t bits = exponent < emin ? ir : (static_cast<uint32_t>(exponent + fmt.bias()) << m) + (ir - (1u << m));
  if (bits >= (fmt.exp_all_ones() << m)) return static_cast<uint16_t>(inf);
  return static_cast<uint16_t>(sign | bits);
}

uint16_t float_to_small(float x, SmallFloat fmt) {
  if (std::isnan(x)) {  // from the float's own bits: converting a signaling NaN to double would quiet it
    uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    return small_nan(bits >> 31, (bits & 0x7FFFFFu) >> (23 - fmt.mant_bits), fmt);
  }
  return double_to_small(static_cast<double>(x), fmt);
}

float small_to_float(uint16_t h, SmallFloat fmt) {
  const int m = fmt.mant_bits;
  const bool negative = (h & 0x8000u) != 0;
  const uint32_t exp_field = (h >> m) & fmt.exp_all_ones();
  const uint32_t mant = h & ((1u << m) - 1);
  if (exp_field == fmt.exp_all_ones()) {  // inf / NaN: keep the payload bit for bit
    const uint32_t bits = (negative ? 0x80000000u : 0u) | 0x7F800000u | (mant << (23 - m));
    float out = 0;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
  const double v =
      exp_field == 0 ? std::ldexp(static_cast<double>(mant), 1 - fmt.bias() - m)
                     : std::ldexp(static_cast<double>(mant | (1u << m)), static_cast<int>(exp_field) - fmt.bias() - m);
  return static_cast<float>(negative ? -v : v);  // exact
}

// ---- scalar helpers ----------------------------------------------------------------------------

Scalar int_scalar(DType t, int64_t v) {
  Scalar s{t};
  s.i = v;
  return s;
}
Scalar float_scalar(DType t, double v) {
  Scalar s{t};
  s.f = v;
  return s;
}

// Two's complement reinterpretation without implementation-defined conversions.
int64_t from_u64(uint64_t u) {
  return u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? static_cast<int64_t>(u)
                                                                         : -static_cast<int64_t>(~u) - 1;
}

// Wraps an integer computed modulo 2^64 into the dtype's range.
int64_t wrap_int(DType t, int64_t v) {
  if (t != DType::Bool && !is_integer(t)) fail(std::string("integer operation on ") + dtype_name(t));
  return wrap_integer(t, v);
}

int precision_bits(DType t) {
  switch (t) {
    case DType::Float16:
      return 11;
    case DType::BFloat16:
      return 8;
    case DType::Float32:
      return 24;
    default:
      return 53;
  }
}

// Rounds a double to the dtype (no-op in float64_math mode or for Float64).
double round_float(DType t, double v, const InterpOptions& opt) {
  if (opt.float64_math) return v;
  switch (t) {
    case DType::Float16:
      return half_bits_to_float(double_to_small(v, kHalf));
    case DType::BFloat16:
      return bf16_bits_to_float(double_to_small(v, kBF16));
    case DType::Float32:
      return static_cast<double>(static_cast<float>(v));
    case DType::Float64:
      return v;
    default:
      fail(std::string("floating operation on ") + dtype_name(t));
  }
}

// An int64 rounded (nearest-even) to `p` significant bits, as a double (exact: p <= 53).
double round_int_to_bits(int64_t v, int p) {
  const bool negative = v < 0;
  uint64_t mag = negative ? ~static_cast<uint64_t>(v) + 1 : static_cast<uint64_t>(v);
  int width = 0;
  for (uint64_t t = mag; t; t >>= 1) ++width;
  int shift = 0;
  if (width > p) {
    shift = width - p;
    const uint64_t rem = mag & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    mag >>= shift;
    if (rem > half || (rem == half && (mag & 1))) ++mag;
  }
  const double r = std::ldexp(static_cast<double>(mag), shift);
  return negative ? -r : r;
}

// float -> int as x86 cvttss2si/cvttsd2si: truncate; NaN or out of range gives the type's minimum.
int64_t float_to_int(double x, DType t) {
  const double lo = t == DType::Int32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = t == DType::Int32 ? 2147483648.0 : 9223372036854775808.0;  // exclusive
  const int64_t bad = t == DType::Int32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  if (std::isnan(x)) return bad;
  const double r = std::trunc(x);
  if (r < lo || r >= hi) return bad;
  return static_cast<int64_t>(r);
}

Scalar cast_scalar(DType to, const Scalar& v, const InterpOptions& opt) {
  const bool from_float = is_floating(v.type);
  if (to == DType::Bool) return int_scalar(to, from_float ? (v.f != 0) : (v.i != 0));
  if (is_integral(to)) return int_scalar(to, from_float ? float_to_int(v.f, to) : wrap_int(to, v.i));
  // float -> small int: through int32, then wrapped (what torch's CPU casts give out of range).
  if (is_small_int(to)) return int_scalar(to, wrap_int(to, from_float ? float_to_int(v.f, DType::Int32) : v.i));
  if (!is_floating(to)) fail(std::string("cast to ") + dtype_name(to));
  if (from_float) return float_scalar(to, round_float(to, v.f, opt));
  // Integer -> floating: round the integer once to the target precision (no double rounding).
  return float_scalar(to, round_float(to, round_int_to_bits(v.i, opt.float64_math ? 53 : precision_bits(to)), opt));
}

// NaN-propagating max/min; between -0 and +0, max is +0 and min is -0.
double nan_max(double x, double y) {
  if (std::isnan(x)) return x;
  if (std::isnan(y)) return y;
  if (x == y) return std::signbit(x) ? y : x;
  return x > y ? x : y;
}
double nan_min(double x, double y) {
  if (std::isnan(x)) return x;
  if (std::isnan(y)) return y;
  if (x == y) return std::signbit(x) ? x : y;
  return x < y ? x : y;
}

// Arithmetic binary ops (Add..Max) on two values of type t.
Scalar arith(ExprKind k, DType t, const Scalar& a, const Scalar& b, const InterpOptions& opt) {
  if (is_floating(t)) {
    const double x = a.f, y = b.f;
    double r = 0;
    switch (k) {
      case ExprKind::Add:
        r = x + y;
        break;
      case ExprKind::Sub:
        r = x - y;
        break;
      case ExprKind::Mul:
        r = x * y;
        break;
      case ExprKind::Div:
        r = x / y;
        break;
      case ExprKind::Mod:
        r = std::fmod(x, y);
        break;
      case ExprKind::Min:
        r = nan_min(x, y);
        break;
      case ExprKind::Max:
        r = nan_max(x, y);
        break;
      default:
        fail(std::string("not an arithmetic op: ") + expr_kind_name(k));
    }
    return float_scalar(t, round_float(t, r, opt));
  }
  const int64_t x = a.i, y = b.i;
  const auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  int64_t r = 0;
  switch (k) {
    case ExprKind::Add:
      r = from_u64(ux + uy);
      break;
    case ExprKind::Sub:
      r = from_u64(ux - uy);
      break;
    case ExprKind::Mul:
      r = from_u64(ux * uy);
      break;
    case ExprKind::Div:
      if (y == 0) fail(std::string("integer division by zero (") + dtype_name(t) + " " + std::to_string(x) + " / 0)");
      r = y == -1 ? from_u64(0 - ux) : x / y;  // INT_MIN / -1 wraps to INT_MIN
      break;
    case ExprKind::Mod:
      if (y == 0) fail(std::string("integer modulo by zero (") + dtype_name(t) + " " + std::to_string(x) + " % 0)");
      r = y == -1 ? 0 : x % y;
      break;
    case ExprKind::Min:
      r = std::min(x, y);
      break;
    case ExprKind::Max:
      r = std::max(x, y);
      break;
    default:
      fail(std::string("not an arithmetic op: ") + expr_kind_name(k));
  }
  return int_scalar(t, wrap_int(t, r));
}

bool compare(ExprKind k, const Scalar& a, const Scalar& b) {
  if (is_floating(a.type)) {
    const double x = a.f, y = b.f;
    switch (k) {
      case ExprKind::EQ:
        return x == y;
      case ExprKind::NE:
        return x != y;
      case ExprKind::LT:
        return x < y;
      case ExprKind::LE:
        return x <= y;
      case ExprKind::GT:
        return x > y;
      case ExprKind::GE:
        return x >= y;
      default:
        break;
    }
  } else {
    const int64_t x = a.i, y = b.i;
    switch (k) {
      case ExprKind::EQ:
        return x == y;
      case ExprKind::NE:
        return x != y;
      case ExprKind::LT:
        return x < y;
      case ExprKind::LE:
        return x <= y;
      case ExprKind::GT:
        return x > y;
      case ExprKind::GE:
        return x >= y;
      default:
        break;
    }
  }
  fail(std::string("not a comparison: ") + expr_kind_name(k));
}

// torch's powi: by squaring, wrapping in t (unsigned arithmetic, then the type's wrap).
int64_t integer_pow(DType t, int64_t base, int64_t exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? (exp % 2 == 0 ? 1 : -1) : 0;
  uint64_t r = 1, b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exp); e != 0; e >>= 1) {
    if (e & 1) r *= b;
    b *= b;
  }
  return wrap_int(t, from_u64(r));
}

Scalar call_intrinsic(const Call* op, const std::vector<Scalar>& args, const InterpOptions& opt) {
  const Scalar& a = args.at(0);
  const DType t = op->type;
  if (op->func == Intrinsic::IsNan) return int_scalar(DType::Bool, is_floating(a.type) && std::isnan(a.f));
  if (op->func == Intrinsic::CheckIndex) {  // (i, lo, hi, dim): raises as the kernels' reports do
    if (a.i < args.at(1).i || a.i >= args.at(2).i) throw_check_index_report(a.i, args.at(2).i, args.at(3).i);
    return a;
  }
  if (!is_floating(a.type)) {  // integer forms of Neg, Abs, Floor, Ceil
    switch (op->func) {
      case Intrinsic::Neg:
        return int_scalar(t, wrap_int(t, from_u64(0 - static_cast<uint64_t>(a.i))));
      case Intrinsic::Abs:
        return int_scalar(t, a.i < 0 ? wrap_int(t, from_u64(0 - static_cast<uint64_t>(a.i))) : a.i);
      case Intrinsic::Floor:
      case Intrinsic::Ceil:
        return int_scalar(t, a.i);
      case Intrinsic::Pow:
        return int_scalar(t, integer_pow(t, a.i, args.at(1).i));
      case Intrinsic::BitAnd:
        return int_scalar(t, a.i & args.at(1).i);
      case Intrinsic::BitOr:
        return int_scalar(t, a.i | args.at(1).i);
      case Intrinsic::BitXor:
        return int_scalar(t, a.i ^ args.at(1).i);
      case Intrinsic::Shl:  // the count is in [0, bits) (the ops clamp it); the bits shift as unsigned
        return int_scalar(t, wrap_int(t, from_u64(static_cast<uint64_t>(a.i) << args.at(1).i)));
      case Intrinsic::Shr:
        return int_scalar(t, a.i >> args.at(1).i);  // arithmetic (the value is sign-extended in int64)
      default:
        fail(std::string(intrinsic_name(op->func)) + " of " + dtype_name(a.type));
    }
  }
  const double x = a.f;
  double r = 0;
  switch (op->func) {
    case Intrinsic::Neg:
      r = -x;
      break;
    case Intrinsic::Abs:
      r = std::fabs(x);
      break;
    case Intrinsic::Exp:
      r = std::exp(x);
      break;
    case Intrinsic::Log:
      r = std::log(x);
      break;
    case Intrinsic::Sqrt:
      r = std::sqrt(x);
      break;
    case Intrinsic::Rsqrt:
      r = 1.0 / std::sqrt(x);
      break;
    case Intrinsic::Tanh:
      r = std::tanh(x);
      break;
    case Intrinsic::Erf:
      r = std::erf(x);
      break;
    case Intrinsic::Pow:
      r = std::pow(x, args.at(1).f);
      break;
    case Intrinsic::Floor:
      r = std::floor(x);
      break;
    case Intrinsic::Ceil:
      r = std::ceil(x);
      break;
    case Intrinsic::IsNan:
      break;  // handled above
    case Intrinsic::Sin:
      r = std::sin(x);
      break;
    case Intrinsic::Cos:
      r = std::cos(x);
      break;
    case Intrinsic::Log1p:
      r = std::log1p(x);
      break;
    case Intrinsic::Expm1:
      r = std::expm1(x);
      break;
    case Intrinsic::Trunc:
      r = std::trunc(x);
      break;
    case Intrinsic::Round:
      r = std::nearbyint(x);  // default rounding mode: half to even
      break;
    case Intrinsic::Tan:
      r = std::tan(x);
      break;
    case Intrinsic::Atan:
      r = std::atan(x);
      break;
    case Intrinsic::Asin:
      r = std::asin(x);
      break;
    case Intrinsic::Acos:
      r = std::acos(x);
      break;
    case Intrinsic::Sinh:
      r = std::sinh(x);
      break;
    case Intrinsic::Cosh:
      r = std::cosh(x);
      break;
    case Intrinsic::Asinh:
      r = std::asinh(x);
      break;
    case Intrinsic::Acosh:
      r = std::acosh(x);
      break;
    case Intrinsic::Atanh:
      r = std::atanh(x);
      break;
    case Intrinsic::Log2:
      r = std::log2(x);
      break;
    case Intrinsic::Log10:
      r = std::log10(x);
      break;
    case Intrinsic::Exp2:
      r = std::exp2(x);
      break;
    case Intrinsic::Erfc:
      r = std::erfc(x);
      break;
    case Intrinsic::Atan2:
      r = std::atan2(x, args.at(1).f);
      break;
    case Intrinsic::Hypot:
      r = std::hypot(x, args.at(1).f);
      break;
    case Intrinsic::BitAnd:
    case Intrinsic::BitOr:
    case Intrinsic::BitXor:
    case Intrinsic::Shl:
    case Intrinsic::Shr:
    case Intrinsic::CheckIndex:
      fail(std::string(intrinsic_name(op->func)) + " of a floating value");
  }
  return float_scalar(t, round_float(t, r, opt));
}

int64_t index_value(const Scalar& s, const char* what) {
  if (!is_integral(s.type)) fail(std::string(what) + " has type " + dtype_name(s.type) + ", expected int32 or int64");
  return s.i;
}

// ---- expression evaluation ---------------------------------------------------------------------

class EvalEnv {
 public:
  virtual ~EvalEnv() = default;
  virtual Scalar lookup(const std::string& name) const = 0;
  virtual Scalar load(const std::string& buffer, int64_t index, DType t) const = 0;
};

void write_caller(DType t, void* base, int64_t index, const Scalar& v);

Scalar eval(const Expr& e, const EvalEnv& env, const InterpOptions& opt) {
  if (!e.defined()) fail("evaluating an undefined expression");
  const DType t = e.type();
  switch (e.kind()) {
    case ExprKind::IntImm:
      return int_scalar(t, e.as<IntImm>()->value);
    case ExprKind::FloatImm:
      return float_scalar(t, round_float(t, e.as<FloatImm>()->value, opt));
    case ExprKind::Var: {
      const std::string& name = e.as<Var>()->name;
      Scalar v = env.lookup(name);
      if (v.type != t) {
        fail("variable '" + name + "' is " + dtype_name(t) + " in the expression but bound to a " + dtype_name(v.type) +
             " value");
      }
      return v;
    }
    case ExprKind::Cast:
      return cast_scalar(t, eval(e.as<Cast>()->value, env, opt), opt);
    case ExprKind::Reinterpret: {  // through memory, as storage holds the value
      const Expr& v = e.as<Reinterpret>()->value;
      alignas(8) unsigned char bits[8] = {};
      write_caller(v.type(), bits, 0, eval(v, env, opt));
      return read_element(t, bits, 0);
    }
    case ExprKind::Add:
    case ExprKind::Sub:
    case ExprKind::Mul:
    case ExprKind::Div:
    case ExprKind::Mod:
    case ExprKind::Min:
    case ExprKind::Max: {
      const auto* op = static_cast<const BinaryNode*>(e.get());
      return arith(e.kind(), t, eval(op->a, env, opt), eval(op->b, env, opt), opt);
    }
    case ExprKind::EQ:
    case ExprKind::NE:
    case ExprKind::LT:
    case ExprKind::LE:
    case ExprKind::GT:
    case ExprKind::GE: {
      const auto* op = static_cast<const BinaryNode*>(e.get());
      return int_scalar(DType::Bool, compare(e.kind(), eval(op->a, env, opt), eval(op->b, env, opt)));
    }
    case ExprKind::And: {  // short-circuit, as in C
      const auto* op = e.as<And>();
      return int_scalar(DType::Bool, eval(op->a, env, opt).i != 0 && eval(op->b, env, opt).i != 0);
    }
    case ExprKind::Or: {
      const auto* op = e.as<Or>();
      return int_scalar(DType::Bool, eval(op->a, env, opt).i != 0 || eval(op->b, env, opt).i != 0);
    }
    case ExprKind::Not:
      return int_scalar(DType::Bool, eval(e.as<Not>()->a, env, opt).i == 0);
    case ExprKind::Select: {  // only the chosen operand is evaluated
      const auto* op = e.as<Select>();
      const Scalar c = eval(op->cond, env, opt);
      if (c.type != DType::Bool) fail(std::string("select condition of type ") + dtype_name(c.type));
      return eval(c.i != 0 ? op->true_value : op->false_value, env, opt);
    }
    case ExprKind::Load: {
      const auto* op = e.as<Load>();
      const int64_t index = index_value(eval(op->index, env, opt), ("index of load from '" + op->buffer + "'").c_str());
      Scalar v = env.load(op->buffer, index, t);
      if (v.type != t) {
        fail("load from '" + op->buffer + "' returned a " + dtype_name(v.type) + " value, expected " + dtype_name(t));
      }
      return v;
    }
    case ExprKind::Call: {
      const auto* op = e.as<Call>();
      std::vector<Scalar> args;
      args.reserve(op->args.size());
      for (const Expr& a : op->args) args.push_back(eval(a, env, opt));
      if (args.empty()) fail(std::string("call of ") + intrinsic_name(op->func) + " without arguments");
      return call_intrinsic(op, args, opt);
    }
  }
  fail(std::string("unknown expression kind ") + std::to_string(static_cast<int>(e.kind())));
}

class FunctionEnv final : public EvalEnv {
 public:
  FunctionEnv(const std::function<Scalar(const std::string&)>& lookup,
              const std::function<Scalar(const std::string&, int64_t, DType)>& load)
      : lookup_(lookup), load_(load) {}
  Scalar lookup(const std::string& name) const override {
    if (!lookup_) fail("no variable lookup given, evaluating '" + name + "'");
    return lookup_(name);
  }
  Scalar load(const std::string& buffer, int64_t index, DType t) const override {
    if (!load_) fail("no load callback given, loading from '" + buffer + "'");
    return load_(buffer, index, t);
  }

 private:
  const std::function<Scalar(const std::string&)>& lookup_;
  const std::function<Scalar(const std::string&, int64_t, DType)>& load_;
};

// ---- memory ------------------------------------------------------------------------------------

struct BufferRef {
  DType dtype = DType::Float32;
  void* data = nullptr;                    // caller memory: bounds unknown
  std::vector<Scalar>* scratch = nullptr;  // Allocate'd memory: bounds-checked
  MemoryScope scope = MemoryScope::Local;
};

// Rounds to the storage type here (once, also in float64_math mode).
void write_caller(DType t, void* base, int64_t index, const Scalar& v) {
  unsigned char* p = static_cast<unsigned char*>(base) + index * dtype_size(t);
  switch (t) {
    case DType::Bool: {
      const uint8_t b = v.i != 0 ? 1 : 0;
      std::memcpy(p, &b, 1);
      return;
    }
    case DType::Int32: {
      const auto x = static_cast<int32_t>(v.i);  // in range: values are kept wrapped
      std::memcpy(p, &x, sizeof x);
      return;
    }
    case DType::Int64:
      std::memcpy(p, &v.i, sizeof v.i);
      return;
    case DType::Float16:
    case DType::BFloat16: {
      const uint16_t h = double_to_small(v.f, t == DType::Float16 ? kHalf : kBF16);
      std::memcpy(p, &h, sizeof h);
      return;
    }
    case DType::Float32: {
      const auto x = static_cast<float>(v.f);
      std::memcpy(p, &x, sizeof x);
      return;
    }
    case DType::Float64:
      std::memcpy(p, &v.f, sizeof v.f);
      return;
    case DType::UInt8: {
      const auto x = static_cast<uint8_t>(wrap_int(t, v.i));
      std::memcpy(p, &x, sizeof x);
      return;
    }
    case DType::Int8: {
      const auto x = static_cast<int8_t>(wrap_int(t, v.i));
      std::memcpy(p, &x, sizeof x);
      return;
    }
    case DType::Int16: {
      const auto x = static_cast<int16_t>(wrap_int(t, v.i));
      std::memcpy(p, &x, sizeof x);
      return;
    }
  }
  fail("write of an invalid dtype");
}

Scalar poison(DType t) {
  Scalar s{t};
  s.f = std::numeric_limits<double>::quiet_NaN();
  switch (t) {
    case DType::Bool:
      s.i = 1;
      break;
    case DType::Int32:
      s.i = wrap_int(DType::Int32, 0xCDCDCDCDLL);
      break;
    case DType::Int64:
      s.i = from_u64(0xCDCDCDCDCDCDCDCDULL);
      break;
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:
      s.i = wrap_int(t, 0xCDCDLL);
      break;
    default:
      break;
  }
  return s;
}

// ---- statement execution -----------------------------------------------------------------------

struct ThreadState {
  std::vector<std::pair<std::string, Scalar>> vars;        // innermost binding last
  std::vector<std::pair<std::string, BufferRef>> buffers;  // params first, then allocations
};

const BufferRef& find_buffer(const ThreadState& ts, const std::string& name) {
  for (auto it = ts.buffers.rbegin(); it != ts.buffers.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  fail("unknown buffer '" + name + "'");
}

void check_scratch_index(const std::string& name, const BufferRef& b, int64_t index) {
  const auto size = static_cast<int64_t>(b.scratch->size());
  if (index < 0 || index >= size) {
    fail("index " + std::to_string(index) + " out of bounds of " +
         (b.scope == MemoryScope::Shared ? "shared" : "local") + " buffer '" + name + "' of size " +
         std::to_string(size));
  }
}

class ThreadEnv final : public EvalEnv {
 public:
  explicit ThreadEnv(const ThreadState& ts) : ts_(ts) {}
  Scalar lookup(const std::string& name) const override {
    for (auto it = ts_.vars.rbegin(); it != ts_.vars.rend(); ++it) {
      if (it->first == name) return it->second;
    }
    fail("unbound variable '" + name + "'");
  }
  Scalar load(const std::string& buffer, int64_t index, DType t) const override {
    const BufferRef& b = find_buffer(ts_, buffer);
    if (b.dtype != t) {
      fail(std::string("load of ") + dtype_name(t) + " from " + dtype_name(b.dtype) + " buffer '" + buffer + "'");
    }
    if (b.scratch) {
      check_scratch_index(buffer, b, index);
      return (*b.scratch)[static_cast<size_t>(index)];
    }
    if (!b.data) fail("load from buffer '" + buffer + "' whose pointer is null");
    return read_element(t, b.data, index);
  }

 private:
  const ThreadState& ts_;
};

using Mask = std::vector<uint8_t>;

// A group of threads executing in lockstep: one thread outside GPUThread loops, a block inside.
struct Group {
  std::vector<ThreadState> threads;
  bool simt = false;
};

class Executor {
 public:
  Executor(const LoweredFunc& f, const InterpOptions& opt) : f_(f), opt_(opt) {}

  void run(ThreadState root) {
    Group g;
    g.threads.push_back(std::move(root));
    exec(f_.body, g, Mask{1});
  }

 private:
  Scalar eval_in(const Expr& e, const ThreadState& ts) const { return eval(e, ThreadEnv(ts), opt_); }

  void exec(const Stmt& s, Group& g, const Mask& m) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case StmtKind::For:
        exec_for(s.as<For>(), g, m);
        return;
      case StmtKind::Store:
        exec_store(s.as<Store>(), g, m);
        return;
      case StmtKind::LetStmt:
        exec_let(s.as<LetStmt>(), g, m);
        return;
      case StmtKind::IfThenElse:
        exec_if(s.as<IfThenElse>(), g, m);
        return;
      case StmtKind::Allocate:
        exec_allocate(s.as<Allocate>(), g, m);
        return;
      case StmtKind::Barrier:
        check_collective("barrier", g, m);
        return;  // lockstep already orders memory
      case StmtKind::BlockReduce:
        exec_block_reduce(s.as<BlockReduce>(), g, m);
        return;
      case StmtKind::Block:
        for (const Stmt& c : s.as<Block>()->stmts) exec(c, g, m);
        return;
    }
    fail("unknown statement kind " + std::to_string(static_cast<int>(s.kind())));
  }

  void exec_store(const Store* op, Group& g, const Mask& m) {
    for (size_t t = 0; t < g.threads.size(); ++t) {
      if (!m[t]) continue;
      ThreadState& ts = g.threads[t];
      const int64_t index = index_value(eval_in(op->index, ts), ("index of store to '" + op->buffer + "'").c_str());
      const Scalar v = eval_in(op->value, ts);
      const BufferRef& b = find_buffer(ts, op->buffer);
      if (v.type != b.dtype) {
        fail(std::string("store of a ") + dtype_name(v.type) + " value into " + dtype_name(b.dtype) + " buffer '" +
             op->buffer + "'");
      }
      if (b.scratch) {
        check_scratch_index(op->buffer, b, index);
        (*b.scratch)[static_cast<size_t>(index)] = v;
      } else {
        if (!b.data) fail("store to buffer '" + op->buffer + "' whose pointer is null");
        write_caller(b.dtype, b.data, index, v);
      }
    }
  }

  void exec_let(const LetStmt* op, Group& g, const Mask& m) {
    for (size_t t = 0; t < g.threads.size(); ++t) {
      // Inactive threads get a placeholder so that every thread's scope stack has the same shape.
      g.threads[t].vars.emplace_back(op->name, m[t] ? eval_in(op->value, g.threads[t]) : Scalar{op->value.type()});
    }
    exec(op->body, g, m);
    for (ThreadState& ts : g.threads) ts.vars.pop_back();
  }

  void exec_if(const IfThenElse* op, Group& g, const Mask& m) {
    const size_t n = g.threads.size();
    Mask then_mask(n, 0), else_mask(n, 0);
    bool any_then = false, any_else = false;
    for (size_t t = 0; t < n; ++t) {
      if (!m[t]) continue;
      const Scalar c = eval_in(op->cond, g.threads[t]);
      if (c.type != DType::Bool) fail(std::string("if condition of type ") + dtype_name(c.type));
      (c.i ? then_mask : else_mask)[t] = 1;
      (c.i ? any_then : any_else) = true;
    }
    if (any_then) exec(op->then_case, g, then_mask);
    if (any_else) exec(op->else_case, g, else_mask);
  }

  void exec_allocate(const Allocate* op, Group& g, const Mask& m) {
    if (op->size < 0) fail("allocate '" + op->name + "' of negative size " + std::to_string(op->size));
    const size_t n = g.threads.size();
    const bool per_thread = op->scope == MemoryScope::Local;
    std::vector<std::vector<Scalar>> storage(per_thread ? n : 1,
                                             std::vector<Scalar>(static_cast<size_t>(op->size), poison(op->dtype)));
    for (size_t t = 0; t < n; ++t) {
      BufferRef b;
      b.dtype = op->dtype;
      b.scratch = &storage[per_thread ? t : 0];
      b.scope = op->scope;
      g.threads[t].buffers.emplace_back(op->name, b);
    }
    exec(op->body, g, m);
    for (ThreadState& ts : g.threads) ts.buffers.pop_back();
  }

  void exec_for(const For* op, Group& g, const Mask& m) {
    if (op->kind == ForKind::GPUThread) {
      if (g.simt) {
        fail("GPUThread loop '" + op->var + "' nested inside another GPUThread loop's body (only a directly " +
             "nested chain of thread loops is supported)");
      }
      exec_thread_block(op, g);
      return;
    }
    if (op->kind == ForKind::GPUBlock && g.simt) fail("GPUBlock loop '" + op->var + "' inside a GPUThread loop");
    const size_t n = g.threads.size();
    std::vector<int64_t> mins(n, 0), extents(n, 0);
    int64_t trips = 0;
    for (size_t t = 0; t < n; ++t) {
      if (!m[t]) continue;
      mins[t] = index_value(eval_in(op->min, g.threads[t]), ("min of loop '" + op->var + "'").c_str());
      extents[t] = index_value(eval_in(op->extent, g.threads[t]), ("extent of loop '" + op->var + "'").c_str());
      trips = std::max(trips, extents[t]);
    }
    if (op->kind == ForKind::GPUBlock) check_launch_dim(f_.grid, op, trips, g.threads[0]);
    if (trips <= 0) return;
    std::vector<size_t> slot(n);
    for (size_t t = 0; t < n; ++t) {
      slot[t] = g.threads[t].vars.size();
      g.threads[t].vars.emplace_back(op->var, int_scalar(DType::Int64, 0));
    }
    Mask iter_mask(n, 0);
    for (int64_t k = 0; k < trips; ++k) {
      for (size_t t = 0; t < n; ++t) {
        iter_mask[t] = m[t] && k < extents[t];
        g.threads[t].vars[slot[t]].second.i = mins[t] + k;
      }
      exec(op->body, g, iter_mask);
    }
    for (ThreadState& ts : g.threads) ts.vars.pop_back();
  }

  // For a GPU loop with a launch dimension given in the LoweredFunc, the loop's extent must match.
  void check_launch_dim(const Expr (&dims)[3], const For* op, int64_t extent, const ThreadState& ts) const {
    if (op->axis < 0 || op->axis > 2) fail("GPU loop '" + op->var + "' has axis " + std::to_string(op->axis));
    const Expr& d = dims[op->axis];
    if (!d.defined()) return;
    const int64_t want = index_value(eval_in(d, ts), "launch dimension");
    if (want != extent) {
      fail(std::string(for_kind_name(op->kind)) + " loop '" + op->var + "' has extent " + std::to_string(extent) +
           " but the launch dimension " + "xyz"[op->axis] + " is " + std::to_string(want));
    }
  }

  // A GPUThread loop (and the thread loops directly nested in it) entered from outside: one block.
  void exec_thread_block(const For* outer, Group& g) {
    const ThreadState& parent = g.threads.at(0);
    std::vector<const For*> chain{outer};
    Stmt body = outer->body;
    for (;;) {
      const Block* blk = body.as<Block>();
      const Stmt inner = blk && blk->stmts.size() == 1 ? blk->stmts[0] : body;
      const For* f = inner.as<For>();
      if (!f || f->kind != ForKind::GPUThread) break;
      chain.push_back(f);
      body = f->body;
    }
    int64_t dims[3] = {1, 1, 1};
    int64_t mins[3] = {0, 0, 0};
    bool seen[3] = {false, false, false};
    for (const For* f : chain) {
      if (f->axis < 0 || f->axis > 2 || seen[f->axis]) {
        fail("GPUThread loop '" + f->var + "' has a bad or repeated axis " + std::to_string(f->axis));
      }
      seen[f->axis] = true;
      mins[f->axis] = index_value(eval_in(f->min, parent), ("min of loop '" + f->var + "'").c_str());
      dims[f->axis] =
          std::max<int64_t>(0, index_value(eval_in(f->extent, parent), ("extent of loop '" + f->var + "'").c_str()));
      check_launch_dim(f_.block, f, dims[f->axis], parent);
    }
    const int64_t count = dims[0] * dims[1] * dims[2];
    if (count == 0) return;

    Group block;
    block.simt = true;
    block.threads.assign(static_cast<size_t>(count), parent);
    // Local scratch declared outside the thread loop: each thread works on its own copy.
    std::vector<std::unique_ptr<std::vector<Scalar>>> local_copies;
    for (ThreadState& ts : block.threads) {
      for (auto& [name, b] : ts.buffers) {
        if (b.scratch && b.scope == MemoryScope::Local) {
          local_copies.push_back(std::make_unique<std::vector<Scalar>>(*b.scratch));
          b.scratch = local_copies.back().get();
        }
      }
    }
    // Thread ids: x fastest, as threadIdx linearizes in CUDA.
    for (int64_t t = 0; t < count; ++t) {
      const int64_t coord[3] = {t % dims[0], (t / dims[0]) % dims[1], t / (dims[0] * dims[1])};
      for (const For* f : chain) {
        block.threads[static_cast<size_t>(t)].vars.emplace_back(
            f->var, int_scalar(DType::Int64, mins[f->axis] + coord[f->axis]));
      }
    }
    exec(body, block, Mask(static_cast<size_t>(count), 1));
  }

  void check_collective(const char* what, const Group& g, const Mask& m) const {
    if (!g.simt) fail(std::string(what) + " outside a GPUThread loop");
    if (std::find(m.begin(), m.end(), 0) != m.end()) {
      fail(std::string("collective under divergent control flow: ") + what + " reached by only some threads");
    }
  }

  void exec_block_reduce(const BlockReduce* op, Group& g, const Mask& m) {
    check_collective("block_reduce", g, m);
    std::vector<Scalar*> slots;
    for (const ThreadState& ts : g.threads) {
      const BufferRef& b = find_buffer(ts, op->buffer);
      if (!b.scratch || b.scope != MemoryScope::Local) fail("block_reduce of '" + op->buffer + "', not a local buffer");
      if (b.dtype != op->dtype) {
        fail(std::string("block_reduce ") + dtype_name(op->dtype) + " of " + dtype_name(b.dtype) + " buffer '" +
             op->buffer + "'");
      }
      check_scratch_index(op->buffer, b, 0);
      slots.push_back(&(*b.scratch)[0]);
    }
    const ExprKind k = op->op == ReduceOp::Sum    ? ExprKind::Add
                       : op->op == ReduceOp::Max  ? ExprKind::Max
                       : op->op == ReduceOp::Prod ? ExprKind::Mul
                                                  : ExprKind::Min;
    Scalar acc = *slots[0];
    for (size_t t = 1; t < slots.size(); ++t) {
      // Bool: sum is or, prod is and.
      if (op->dtype == DType::Bool && k == ExprKind::Add) {
        acc = int_scalar(DType::Bool, acc.i != 0 || slots[t]->i != 0);
      } else if (op->dtype == DType::Bool && k == ExprKind::Mul) {
        acc = int_scalar(DType::Bool, acc.i != 0 && slots[t]->i != 0);
      } else {
        acc = arith(k, op->dtype, acc, *slots[t], opt_);
      }
    }
    for (Scalar* s : slots) *s = acc;
  }

  const LoweredFunc& f_;
  const InterpOptions& opt_;
};

Scalar scalar_param(const Param& p, const ArgValue& a) {
  switch (p.dtype) {
    case DType::Bool:
      return int_scalar(p.dtype, a.i64 != 0);
    case DType::Int32:
      if (a.i64 < std::numeric_limits<int32_t>::min() || a.i64 > std::numeric_limits<int32_t>::max()) {
        fail("int32 scalar parameter '" + p.name + "' given " + std::to_string(a.i64));
      }
      return int_scalar(p.dtype, a.i64);
    case DType::Int64:
      return int_scalar(p.dtype, a.i64);
    default:
      return float_scalar(p.dtype, round_float(p.dtype, a.f64, InterpOptions{}));  // the kernel's input
  }
}

}  // namespace

Scalar read_element(DType t, const void* base, int64_t index) {
  const unsigned char* p = static_cast<const unsigned char*>(base) + index * dtype_size(t);
  switch (t) {
    case DType::Bool: {
      uint8_t v = 0;
      std::memcpy(&v, p, 1);
      return int_scalar(t, v != 0);
    }
    case DType::Int32: {
      int32_t v = 0;
      std::memcpy(&v, p, sizeof v);
      return int_scalar(t, v);
    }
    case DType::Int64: {
      int64_t v = 0;
      std::memcpy(&v, p, sizeof v);
      return int_scalar(t, v);
    }
    case DType::Float16:
    case DType::BFloat16: {
      uint16_t v = 0;
      std::memcpy(&v, p, sizeof v);
      return float_scalar(t, t == DType::Float16 ? half_bits_to_float(v) : bf16_bits_to_float(v));
    }
    case DType::Float32: {
      float v = 0;
      std::memcpy(&v, p, sizeof v);
      return float_scalar(t, v);
    }
    case DType::Float64: {
      double v = 0;
      std::memcpy(&v, p, sizeof v);
      return float_scalar(t, v);
    }
    case DType::UInt8: {
      uint8_t v = 0;
      std::memcpy(&v, p, sizeof v);
      return int_scalar(t, v);
    }
    case DType::Int8: {
      int8_t v = 0;
      std::memcpy(&v, p, sizeof v);
      return int_scalar(t, v);
    }
    case DType::Int16: {
      int16_t v = 0;
      std::memcpy(&v, p, sizeof v);
      return int_scalar(t, v);
    }
  }
  fail("read of an invalid dtype");
}

uint16_t float_to_half_bits(float x) {
  return float_to_small(x, kHalf);
}
float half_bits_to_float(uint16_t h) {
  return small_to_float(h, kHalf);
}
uint16_t float_to_bf16_bits(float x) {
  return float_to_small(x, kBF16);
}
float bf16_bits_to_float(uint16_t h) {
  return small_to_float(h, kBF16);
}

Scalar eval_expr(const Expr& e, const std::function<Scalar(const std::string& var)>& lookup,
                 const std::function<Scalar(const std::string& buffer, int64_t index, DType t)>& load,
                 const InterpOptions& opt) {
  return eval(e, FunctionEnv(lookup, load), opt);
}

void interpret(const LoweredFunc& f, const std::vector<ArgValue>& args, const InterpOptions& opt) {
  if (args.size() != f.params.size()) {
    fail("kernel '" + f.name + "' takes " + std::to_string(f.params.size()) + " arguments, given " +
         std::to_string(args.size()));
  }
  if (!f.body.defined()) fail("kernel '" + f.name + "' has no body");
  ThreadState root;
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = f.params[i];
    if (p.kind == ParamKind::Buffer) {
      BufferRef b;
      b.dtype = p.dtype;
      b.data = args[i].ptr;
      root.buffers.emplace_back(p.name, b);
    } else {
      root.vars.emplace_back(p.name, scalar_param(p, args[i]));
    }
  }
  try {
    Executor(f, opt).run(std::move(root));
  } catch (const OpError& e) {  // the user's error (an index check): its kind picks the Python exception
    throw OpError(e.kind, std::string(e.what()) + " (in kernel '" + f.name + "')");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (in kernel '" + f.name + "')");
  }
}

}  // namespace flow::dsl

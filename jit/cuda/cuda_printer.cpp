// Note: one Printer object per kernel walks the loop nest once and writes C++ text.
//  - Expressions are printed with C precedence (minimal parentheses). Int64 literals print bare
//    only as an operand next to a non-constant (where C's usual conversions make them 64-bit);
//    elsewhere as int64_t(5), so constant-only arithmetic never runs in 32 bits.
//  - Each IR name maps to a C identifier by a pure function (invalid characters -> '_', reserved
//    words and names in the flow_ namespace get a suffix/prefix). Let and Allocate declare in the
//    current C scope; a name already declared in that scope opens a fresh brace scope.
//  - Vectorized loops: see print_vectorized. An access is vectorized when its index, with the
//    loop body's Let bindings substituted, is linear in the lane variable with coefficient 1 and a
//    base free of loads; a buffer both read and written in the loop, written more than once, or
//    accessed under an if inside the loop stays scalar (hoisting would reorder those accesses), and
//    so does one read under a Select arm or the right side of And/Or unless the body also reads
//    the same vector unconditionally (a vector load reads every lane, and the unchosen lanes'
//    indices may be out of range: cat's `j < n ? a[j] : b[j - n]`).
//    The vector form runs only when every vector access is aligned at run time
//    (flow::vec_aligned), else the same lanes run as scalars: a buffer's base may be a view at any
//    element offset, which no kernel key records.
#include "jit/cuda/cuda_printer.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "dsl/ir_visitor.h"

namespace flow::jit::cuda {

using namespace flow::dsl;  // NOLINT: the printer touches every IR type

const char* cuda_type_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "int32_t";
    case DType::Int64:
      return "int64_t";
    case DType::Float16:
      return "flow::half";
    case DType::BFloat16:
      return "flow::bfloat16";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    case DType::UInt8:
      return "uint8_t";
    case DType::Int8:
      return "int8_t";
    case DType::Int16:
      return "int16_t";
  }
  throw std::invalid_argument("cuda_type_name: invalid dtype");
}

namespace {

// ---- names ---------------------------------------------------------------------------------------

const std::set<std::string>& reserved_names() {
  static const std::set<std::string> names = {
      // C++ keywords and literals
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
      "char16_t", "char32_t", "class", "compl", "const", "constexpr", "const_cast", "continue", "decltype", "default",
      "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
      "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "return",
      "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
      "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
      "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
      // CUDA built-ins and the names the helpers define
      "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "flow", "int64_t", "int32_t", "uint64_t", "uint32_t",
      "uint16_t", "uint8_t", "half", "bfloat16", "min", "max", "abs", "isnan", "main",
      // math functions a name could shadow
      "exp", "expf", "log", "logf", "sqrt", "sqrtf", "rsqrt", "rsqrtf", "tanh", "tanhf", "erf", "erff", "pow", "powf",
      "floor", "floorf", "ceil", "ceilf", "fabs", "fabsf", "fmod", "fmodf", "fmin", "fminf", "fmax", "fmaxf"};
  return names;
}

// Maps an IR name to a C identifier (a pure function, so every use agrees).
std::string c_name(const std::string& name) {
  std::string out;
  for (const char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
    out += ok ? ch : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out = "v_" + out;
  if (out.rfind("flow_", 0) == 0 || out.rfind("__", 0) == 0) out = "u" + out;  // flow_* is the printer's
  if (reserved_names().count(out)) out += "_";
  return out;
}

// ---- small IR queries ----------------------------------------------------------------------------

class UsesVar : public IRVisitor {
 public:
  explicit UsesVar(const std::string& n) : name_(n) {}
  bool found = false;

 protected:
  void visit_Var(const Var* op) override { found = found || op->name == name_; }

 private:
  const std::string& name_;
};

bool uses_var(const Expr& e, const std::string& name) {
  UsesVar v(name);
  v.visit(e);
  return v.found;
}

class HasLoad : public IRVisitor {
 public:
  bool found = false;

 protected:
  void visit_Load(const Load*) override { found = true; }
};

bool has_load(const Expr& e) {
  HasLoad v;
  v.visit(e);
  return v.found;
}

// Statement kinds a vectorized body may contain for the vector form (anything else: unrolled).
class VectorizableBody : public IRVisitor {
 public:
  bool ok = true;

 protected:
  void visit_For(const For*) override { ok = false; }
  void visit_Allocate(const Allocate*) override { ok = false; }
  void visit_Barrier(const Barrier*) override { ok = false; }
  void visit_BlockReduce(const BlockReduce*) override { ok = false; }
};

// index = base + coef * lane, with base free of the lane variable (undefined base = 0).
struct Linear {
  Expr base;
  int64_t coef = 0;
};

std::optional<Linear> linear_in(const Expr& e, const std::string& lane) {
  if (!uses_var(e, lane)) return Linear{e, 0};
  if (const Var* v = e.as<Var>()) {
    if (v->name == lane) return Linear{Expr(), 1};
    return std::nullopt;
  }
  const auto add = [](const Expr& a, const Expr& b) -> Expr {
    if (!a.defined()) return b;
    if (!b.defined()) return a;
    return a + b;
  };
  if (const Add* op = e.as<Add>()) {
    const auto a = linear_in(op->a, lane);
    const auto b = linear_in(op->b, lane);
    if (!a || !b) return std::nullopt;
    return Linear{add(a->base, b->base), a->coef + b->coef};
  }
  if (const Sub* op = e.as<Sub>()) {
    const auto a = linear_in(op->a, lane);
    const auto b = linear_in(op->b, lane);
    if (!a || !b) return std::nullopt;
    Expr base = a->base;
    if (b->base.defined()) base = base.defined() ? base - b->base : make_zero(b->base.type()) - b->base;
    return Linear{base, a->coef - b->coef};
  }
  if (const Mul* op = e.as<Mul>()) {
    for (int side = 0; side < 2; ++side) {
      const Expr& c = side == 0 ? op->a : op->b;
      const Expr& x = side == 0 ? op->b : op->a;
      const int64_t* k = as_const_int(c);
      if (!k) continue;
      const auto l = linear_in(x, lane);
      if (!l) return std::nullopt;
      return Linear{l->base.defined() ? l->base * c : Expr(), l->coef * *k};
    }
  }
  return std::nullopt;
}

// ---- literals ------------------------------------------------------------------------------------

std::string float_literal(double v, DType t) {
  const bool f32 = t == DType::Float32;
  if (std::isnan(v)) return f32 ? "__int_as_float(0x7fffffff)" : "__longlong_as_double(0x7ff8000000000000LL)";
  if (std::isinf(v)) {
    const std::string inf = f32 ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)";
    return v < 0 ? "-" + inf : inf;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), f32 ? "%.9g" : "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return f32 ? s + "f" : s;
}

std::string int_literal(int64_t v, DType t, bool bare) {
  if (t == DType::Bool) return v ? "true" : "false";
  if (t == DType::Int32) return v == INT32_MIN ? "(-2147483647 - 1)" : std::to_string(v);
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  if (bare && v > INT32_MIN && v <= INT32_MAX) return std::to_string(v);
  if (v > INT32_MIN && v <= INT32_MAX) return "int64_t(" + std::to_string(v) + ")";
  return "int64_t(" + std::to_string(v) + "LL)";
}

bool is_binary_kind(ExprKind k) {
  switch (k) {
#define FLOW_X(name) case ExprKind::name:
    FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X
    return true;
    default:
      return false;
  }
}

bool is_constant(const Expr& e) {
  return e.as<IntImm>() || e.as<FloatImm>();
}

// C precedence levels (higher binds tighter).
constexpr int kPrecTernary = 3, kPrecOr = 4, kPrecAnd = 5, kPrecEq = 9, kPrecRel = 10, kPrecAdd = 12, kPrecMul = 13,
              kPrecUnary = 15, kPrecAtom = 16;

struct Printed {
  std::string s;
  int prec;
};

// ---- the printer ---------------------------------------------------------------------------------

class Printer {
 public:
  explicit Printer(const LoweredFunc& f) : f_(f) {}

  CudaSource run();

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("print_cuda: kernel '" + f_.name + "': " + what);
  }

  // expressions
  Printed print(const Expr& e, bool bare_int = false);
  std::string operand(const Expr& e, int parent_prec, bool right, bool bare_int);
  std::string top(const Expr& e) { return print(e, true).s; }
  Printed binary(const BinaryNode* op, const char* sym, int prec);
  Printed call(const Call* op);
  Printed cast(const Cast* op);
  Printed reinterpret(const Reinterpret* op);

  // statements
  void line(const std::string& s) { os_ << std::string(2 * indent_, ' ') << s << "\n"; }
  void stmt(const Stmt& s);
  void print_for(const For* op);
  void print_gpu_loop(const For* op);
  void print_serial(const For* op, bool unroll, const char* comment);
  void print_vectorized(const For* op);
  void print_allocate(const Allocate* op);
  void print_block_reduce(const BlockReduce* op);

  // Declares a C name in the current scope; returns true when the caller had to open a new brace
  // scope (because the name was already declared in this one) and must close it after the body.
  bool declare(const std::string& name);
  void open_scope() { scopes_.emplace_back(); }
  bool in_scope(const std::string& c) const {
    return std::any_of(scopes_.begin(), scopes_.end(), [&](const auto& s) { return s.count(c) > 0; });
  }
  void close_scope() { scopes_.pop_back(); }

  DType buffer_type(const std::string& buffer) const;
  bool is_param_buffer(const std::string& buffer) const;

  void collect_reductions(const Stmt& s);

  const LoweredFunc& f_;
  std::ostringstream os_;
  int indent_ = 0;
  std::vector<std::set<std::string>> scopes_;
  std::map<std::string, const Param*> params_;
  std::vector<std::map<std::string, DType>> allocations_;  // Allocates in scope, innermost last
  int divergent_depth_ = 0;  // enclosing serial/unrolled/vectorized loops and ifs (collectives banned)
  std::unordered_map<const ExprNode*, std::string> load_vector_;   // vectorized Load -> lane expression
  std::unordered_map<const StmtNode*, std::string> store_vector_;  // vectorized Store -> lane lvalue
  std::set<DType> reduce_types_;
};

DType Printer::buffer_type(const std::string& buffer) const {
  for (auto it = allocations_.rbegin(); it != allocations_.rend(); ++it) {
    const auto found = it->find(buffer);
    if (found != it->end()) return found->second;
  }
  const auto p = params_.find(buffer);
  if (p == params_.end() || p->second->kind != ParamKind::Buffer) fail("unknown buffer '" + buffer + "'");
  return p->second->dtype;
}

bool Printer::is_param_buffer(const std::string& buffer) const {
  for (const auto& scope : allocations_) {
    if (scope.count(buffer)) return false;
  }
  const auto p = params_.find(buffer);
  return p != params_.end() && p->second->kind == ParamKind::Buffer;
}

bool Printer::declare(const std::string& name) {
  const std::string c = c_name(name);
  if (scopes_.back().count(c)) {
    line("{");
    ++indent_;
    open_scope();
    scopes_.back().insert(c);
    return true;
  }
  scopes_.back().insert(c);
  return false;
}

// ---- expressions -----------------------------------------------------------------------------------

std::string Printer::operand(const Expr& e, int parent_prec, bool right, bool bare_int) {
  const Printed p = print(e, bare_int);
  bool paren = p.prec < parent_prec || (right && p.prec == parent_prec);
  // Comparisons and logic: parenthesize non-arithmetic operands for clarity (and -Wparentheses).
  if (parent_prec <= kPrecRel && p.prec < kPrecAdd && p.prec != kPrecUnary) paren = true;
  return paren ? "(" + p.s + ")" : p.s;
}

Printed Printer::binary(const BinaryNode* op, const char* sym, int prec) {
  const bool bare_a = !is_constant(op->b);
  const bool bare_b = !is_constant(op->a);
  return {operand(op->a, prec, false, bare_a) + " " + sym + " " + operand(op->b, prec, true, bare_b), prec};
}

// Casts follow the interpreter: half types go through float (float64 and integers through double,
// rounding once); float -> int is flow::float_to_int (NaN / out of range -> INT_MIN); x -> bool is
// x != 0 (NaN is true).
Printed Printer::cast(const Cast* op) {
  const DType to = op->type;
  const DType from = op->value.type();
  if (to == from) return print(op->value);
  const std::string to_name = cuda_type_name(to);
  // The source as a plain C arithmetic value (halves widened to float).
  const Printed src = is_half(from) ? Printed{"flow::to_float(" + top(op->value) + ")", kPrecAtom} : print(op->value);
  const DType src_type = is_half(from) ? DType::Float32 : from;
  const std::string v = src.s;
  if (to == DType::Bool) {
    const std::string x = src.prec < kPrecAdd && src.prec != kPrecUnary ? "(" + v + ")" : v;
    return {x + " != 0", kPrecEq};
  }
  if (is_half(to)) {
    const char* fn = to == DType::Float16 ? "half" : "bfloat16";
    if (src_type == DType::Float32) return {std::string("flow::float_to_") + fn + "(" + v + ")", kPrecAtom};
    if (src_type == DType::Bool)
      return {std::string("flow::float_to_") + fn + "(static_cast<float>(" + v + "))", kPrecAtom};
    const std::string d = src_type == DType::Float64 ? v : "static_cast<double>(" + v + ")";
    return {std::string("flow::double_to_") + fn + "(" + d + ")", kPrecAtom};
  }
  if (is_floating(src_type) && is_integral(to)) return {"flow::float_to_int<" + to_name + ">(" + v + ")", kPrecAtom};
  // float -> small int: through int32, then wrapped (the interpreter's rule).
  if (is_floating(src_type) && is_small_int(to))
    return {"static_cast<" + to_name + ">(flow::float_to_int<int32_t>(" + v + "))", kPrecAtom};
  if (src_type == to) return src;
  return {"static_cast<" + to_name + ">(" + v + ")", kPrecAtom};
}

// The bit-cast intrinsics of CUDA for 4- and 8-byte types; the half types are structs over their
// bits; between uint8 and int8 the integer conversion keeps the bits (two's complement).
Printed Printer::reinterpret(const Reinterpret* op) {
  const DType to = op->type;
  const DType from = op->value.type();
  const std::string v = top(op->value);
  if (to == DType::Int32 && from == DType::Float32) return {"__float_as_int(" + v + ")", kPrecAtom};
  if (to == DType::Float32 && from == DType::Int32) return {"__int_as_float(" + v + ")", kPrecAtom};
  if (to == DType::Int64 && from == DType::Float64)
    return {"static_cast<int64_t>(__double_as_longlong(" + v + "))", kPrecAtom};
  if (to == DType::Float64 && from == DType::Int64) return {"__longlong_as_double(" + v + ")", kPrecAtom};
  const std::string bits = is_half(from) ? "(" + v + ").bits" : "static_cast<uint16_t>(" + v + ")";
  if (is_half(to)) return {std::string(cuda_type_name(to)) + "{" + bits + "}", kPrecAtom};
  if (to == DType::Int16) return {"static_cast<int16_t>(" + bits + ")", kPrecAtom};
  if ((to == DType::Int8 && from == DType::UInt8) || (to == DType::UInt8 && from == DType::Int8))
    return {"static_cast<" + std::string(cuda_type_name(to)) + ">(" + v + ")", kPrecAtom};
  fail(std::string("reinterpret of ") + dtype_name(from) + " as " + dtype_name(to));
}

Printed Printer::call(const Call* op) {
  for (const Expr& a : op->args) {
    if (is_half(a.type())) fail(std::string("intrinsic ") + intrinsic_name(op->func) + " on a half type");
  }
  const DType t = op->args.empty() ? op->type : op->args[0].type();
  const bool f32 = t == DType::Float32;
  const bool fp = is_floating(t);
  const auto fn = [&](const char* name32, const char* name64) {
    std::string s = std::string(f32 ? name32 : name64) + "(";
    for (size_t i = 0; i < op->args.size(); ++i) s += (i ? ", " : "") + top(op->args[i]);
    return Printed{s + ")", kPrecAtom};
  };
  switch (op->func) {
    case Intrinsic::Neg: {
      const std::string x = operand(op->args[0], kPrecUnary, false, false);
      return {x[0] == '-' ? "-(" + x + ")" : "-" + x, kPrecUnary};
    }
    case Intrinsic::Abs:
      return {"flow::abs<" + std::string(cuda_type_name(t)) + ">(" + top(op->args[0]) + ")", kPrecAtom};
    case Intrinsic::Exp:
      return fn("expf", "exp");
    case Intrinsic::Log:
      return fn("logf", "log");
    case Intrinsic::Sqrt:
      return fn("sqrtf", "sqrt");
    case Intrinsic::Rsqrt:
      return fn("rsqrtf", "rsqrt");
    case Intrinsic::Tanh:
      return fn("tanhf", "tanh");
    case Intrinsic::Erf:
      return fn("erff", "erf");
    case Intrinsic::Pow:
      if (!fp) return {"flow::ipow(" + top(op->args[0]) + ", " + top(op->args[1]) + ")", kPrecAtom};
      return fn("powf", "pow");
    case Intrinsic::Floor:
      return fp ? fn("floorf", "floor") : print(op->args[0]);
    case Intrinsic::Ceil:
      return fp ? fn("ceilf", "ceil") : print(op->args[0]);
    case Intrinsic::IsNan:
      return fp ? fn("isnan", "isnan") : Printed{"false", kPrecAtom};
    case Intrinsic::Sin:
      return fn("sinf", "sin");
    case Intrinsic::Cos:
      return fn("cosf", "cos");
    case Intrinsic::Log1p:
      return fn("log1pf", "log1p");
    case Intrinsic::Expm1:
      return fn("expm1f", "expm1");
    case Intrinsic::Trunc:
      return fp ? fn("truncf", "trunc") : print(op->args[0]);
    case Intrinsic::Round:
      return fp ? fn("rintf", "rint") : print(op->args[0]);
    case Intrinsic::Tan:
      return fn("tanf", "tan");
    case Intrinsic::Atan:
      return fn("atanf", "atan");
    case Intrinsic::Asin:
      return fn("asinf", "asin");
    case Intrinsic::Acos:
      return fn("acosf", "acos");
    case Intrinsic::Sinh:
      return fn("sinhf", "sinh");
    case Intrinsic::Cosh:
      return fn("coshf", "cosh");
    case Intrinsic::Asinh:
      return fn("asinhf", "asinh");
    case Intrinsic::Acosh:
      return fn("acoshf", "acosh");
    case Intrinsic::Atanh:
      return fn("atanhf", "atanh");
    case Intrinsic::Log2:
      return fn("log2f", "log2");
    case Intrinsic::Log10:
      return fn("log10f", "log10");
    case Intrinsic::Exp2:
      return fn("exp2f", "exp2");
    case Intrinsic::Erfc:
      return fn("erfcf", "erfc");
    case Intrinsic::Atan2:
      return fn("atan2f", "atan2");
    case Intrinsic::Hypot:
      return fn("hypotf", "hypot");
    case Intrinsic::BitAnd:
    case Intrinsic::BitOr:
    case Intrinsic::BitXor:
    case Intrinsic::Shr: {
      const char* sym = op->func == Intrinsic::BitAnd   ? " & "
                        : op->func == Intrinsic::BitOr  ? " | "
                        : op->func == Intrinsic::BitXor ? " ^ "
                                                        : " >> ";  // arithmetic on signed integers
      // Each operand parenthesized: & | ^ >> bind more loosely than comparisons or ?: would need.
      return {"((" + top(op->args[0]) + ")" + sym + "(" + top(op->args[1]) + "))", kPrecAtom};
    }
    case Intrinsic::CheckIndex:  // reports into the kernel's error word (the last parameter)
      return {"flow::check_index(" + top(op->args[0]) + ", " + top(op->args[1]) + ", " + top(op->args[2]) + ", " +
                  top(op->args[3]) + ", " + std::string(kErrorWordParam) + ")",
              kPrecAtom};
    case Intrinsic::Shl: {  // shift the bits as unsigned (a signed left shift of a negative is undefined)
      const std::string ut = t == DType::Int32 ? "unsigned int" : "unsigned long long";
      return {"static_cast<" + std::string(cuda_type_name(t)) + ">(static_cast<" + ut + ">(" + top(op->args[0]) +
                  ") << (" + top(op->args[1]) + "))",
              kPrecAtom};
    }
  }
  fail("invalid intrinsic");
}

Printed Printer::print(const Expr& e, bool bare_int) {
  if (!e.defined()) fail("undefined expression");
  switch (e.kind()) {
    case ExprKind::IntImm: {
      const IntImm* op = e.as<IntImm>();
      const std::string s = int_literal(op->value, op->type, bare_int);
      return {s, s[0] == '-' ? kPrecUnary : kPrecAtom};
    }
    case ExprKind::FloatImm: {
      const FloatImm* op = e.as<FloatImm>();
      const std::string s = float_literal(op->value, op->type);
      return {s, s[0] == '-' ? kPrecUnary : kPrecAtom};
    }
    case ExprKind::Var:
      return {c_name(e.as<Var>()->name), kPrecAtom};
    case ExprKind::Cast:
      return cast(e.as<Cast>());
    case ExprKind::Reinterpret:
      return reinterpret(e.as<Reinterpret>());
    default:
      break;
  }
  if (is_binary_kind(e.kind())) {
    const auto* bin = static_cast<const BinaryNode*>(e.get());
    const DType t = bin->a.type();
    if (is_half(t) || is_half(bin->b.type())) {
      fail(std::string("arithmetic on a half type (") + expr_kind_name(e.kind()) + "): cast to float32 first");
    }
    const bool fp = is_floating(t);
    switch (e.kind()) {
      case ExprKind::Add:
        return binary(bin, "+", kPrecAdd);
      case ExprKind::Sub:
        return binary(bin, "-", kPrecAdd);
      case ExprKind::Mul:
        return binary(bin, "*", kPrecMul);
      case ExprKind::Div:
        return binary(bin, "/", kPrecMul);  // integers truncate, as the IR
      case ExprKind::Mod:
        if (fp)
          return {std::string(t == DType::Float32 ? "fmodf(" : "fmod(") + top(bin->a) + ", " + top(bin->b) + ")",
                  kPrecAtom};
        return binary(bin, "%", kPrecMul);
      case ExprKind::Min:
      case ExprKind::Max: {
        const char* f = e.kind() == ExprKind::Min ? "flow::min<" : "flow::max<";
        return {f + std::string(cuda_type_name(t)) + ">(" + top(bin->a) + ", " + top(bin->b) + ")", kPrecAtom};
      }
      case ExprKind::EQ:
        return binary(bin, "==", kPrecEq);
      case ExprKind::NE:
        return binary(bin, "!=", kPrecEq);
      case ExprKind::LT:
        return binary(bin, "<", kPrecRel);
      case ExprKind::LE:
        return binary(bin, "<=", kPrecRel);
      case ExprKind::GT:
        return binary(bin, ">", kPrecRel);
      case ExprKind::GE:
        return binary(bin, ">=", kPrecRel);
      case ExprKind::And:
        return binary(bin, "&&", kPrecAnd);
      case ExprKind::Or:
        return binary(bin, "||", kPrecOr);
      default:
        break;
    }
  }
  switch (e.kind()) {
    case ExprKind::Not:
      return {"!" + operand(e.as<Not>()->a, kPrecUnary, false, false), kPrecUnary};
    case ExprKind::Select: {
      const Select* op = e.as<Select>();
      return {operand(op->cond, kPrecTernary + 1, false, false) + " ? " +
                  operand(op->true_value, kPrecTernary + 1, false, false) + " : " +
                  operand(op->false_value, kPrecTernary, false, false),
              kPrecTernary};
    }
    case ExprKind::Load: {
      const Load* op = e.as<Load>();
      const auto vec = load_vector_.find(op);
      if (vec != load_vector_.end()) return {vec->second, kPrecAtom};
      const DType t = buffer_type(op->buffer);
      if (t != op->type)
        fail("load of " + std::string(dtype_name(op->type)) + " from " + dtype_name(t) + " buffer '" + op->buffer +
             "'");
      return {c_name(op->buffer) + "[" + top(op->index) + "]", kPrecAtom};
    }
    case ExprKind::Call:
      return call(e.as<Call>());
    default:
      break;
  }
  fail(std::string("unsupported expression kind ") + expr_kind_name(e.kind()));
}

// ---- statements ------------------------------------------------------------------------------------

void Printer::stmt(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::For:
      print_for(s.as<For>());
      return;
    case StmtKind::Store: {
      const Store* op = s.as<Store>();
      const DType t = buffer_type(op->buffer);
      if (op->value.type() != t) {
        fail("store of " + std::string(dtype_name(op->value.type())) + " into " + dtype_name(t) + " buffer '" +
             op->buffer + "'");
      }
      if (is_param_buffer(op->buffer) && !params_.at(op->buffer)->is_output) {
        fail("store to input buffer '" + op->buffer + "' (mark the param is_output)");
      }
      const auto vec = store_vector_.find(op);
      const std::string target =
          vec != store_vector_.end() ? vec->second : c_name(op->buffer) + "[" + top(op->index) + "]";
      line(target + " = " + top(op->value) + ";");
      return;
    }
    case StmtKind::LetStmt: {
      const LetStmt* op = s.as<LetStmt>();
      const std::string value = top(op->value);
      const bool scoped = declare(op->name);
      line("const " + std::string(cuda_type_name(op->value.type())) + " " + c_name(op->name) + " = " + value + ";");
      stmt(op->body);
      if (scoped) {
        close_scope();
        --indent_;
        line("}");
      }
      return;
    }
    case StmtKind::IfThenElse: {
      const IfThenElse* op = s.as<IfThenElse>();
      ++divergent_depth_;
      line("if (" + top(op->cond) + ") {");
      ++indent_;
      open_scope();
      stmt(op->then_case);
      close_scope();
      --indent_;
      if (op->else_case.defined()) {
        line("} else {");
        ++indent_;
        open_scope();
        stmt(op->else_case);
        close_scope();
        --indent_;
      }
      line("}");
      --divergent_depth_;
      return;
    }
    case StmtKind::Allocate:
      print_allocate(s.as<Allocate>());
      return;
    case StmtKind::Barrier:
      if (divergent_depth_) fail("barrier under a loop or an if (every thread must reach it)");
      line("__syncthreads();");
      return;
    case StmtKind::BlockReduce:
      print_block_reduce(s.as<BlockReduce>());
      return;
    case StmtKind::Block:
      for (const Stmt& c : s.as<Block>()->stmts) stmt(c);
      return;
  }
  fail("unsupported statement kind");
}

void Printer::print_allocate(const Allocate* op) {
  if (op->size <= 0) fail("allocation '" + op->name + "' of size " + std::to_string(op->size));
  const bool scoped = declare(op->name);
  const std::string decl =
      std::string(cuda_type_name(op->dtype)) + " " + c_name(op->name) + "[" + std::to_string(op->size) + "];";
  if (op->scope == MemoryScope::Shared) {
    line("__shared__ " + decl);
  } else {
    line(decl + "  // local (registers when indexed by constants)");
  }
  allocations_.push_back({{op->name, op->dtype}});
  stmt(op->body);
  allocations_.pop_back();
  if (scoped) {
    close_scope();
    --indent_;
    line("}");
  }
}

std::string reduce_scratch_name(DType t) {
  return std::string("flow_reduce_") + dtype_name(t);
}

void Printer::print_block_reduce(const BlockReduce* op) {
  if (divergent_depth_) fail("block_reduce under a loop or an if (every thread must reach it)");
  const DType t = buffer_type(op->buffer);
  if (t != op->dtype) fail("block_reduce dtype differs from buffer '" + op->buffer + "'");
  if (is_param_buffer(op->buffer))
    fail("block_reduce on global buffer '" + op->buffer + "' (needs a Local allocation)");
  const char* fn = op->op == ReduceOp::Sum    ? "sum"
                   : op->op == ReduceOp::Max  ? "max"
                   : op->op == ReduceOp::Prod ? "prod"
                                              : "min";
  const std::string slot = c_name(op->buffer) + "[0]";
  if (t == DType::Bool) {  // sum, max: or; min, prod: and (max / min over {0, 1})
    fn = op->op == ReduceOp::Min || op->op == ReduceOp::Prod ? "min" : "max";
    line(slot + " = flow::block_reduce_" + fn + "<int32_t>(static_cast<int32_t>(" + slot + "), " +
         reduce_scratch_name(DType::Int32) + ") != 0;");
    return;
  }
  line(slot + " = flow::block_reduce_" + fn + "<" + cuda_type_name(t) + ">(" + slot + ", " + reduce_scratch_name(t) +
       ");");
}

void Printer::print_for(const For* op) {
  switch (op->kind) {
    case ForKind::GPUBlock:
    case ForKind::GPUThread:
      print_gpu_loop(op);
      return;
    case ForKind::Serial:
      print_serial(op, false, nullptr);
      return;
    case ForKind::Unrolled:
      if (!as_const_int(op->extent)) fail("unrolled loop '" + op->var + "' needs a constant extent");
      print_serial(op, true, nullptr);
      return;
    case ForKind::Vectorized:
      print_vectorized(op);
      return;
    case ForKind::Parallel:
      fail("Parallel loop '" + op->var + "' is CPU-only (use gpu_block/gpu_thread loops for CUDA)");
  }
  fail("invalid loop kind");
}

void Printer::print_gpu_loop(const For* op) {
  const bool block = op->kind == ForKind::GPUBlock;
  if (op->axis < 0 || op->axis > 2) fail("GPU loop '" + op->var + "' has axis " + std::to_string(op->axis));
  if (divergent_depth_) fail("GPU loop '" + op->var + "' under a serial loop or an if");
  const char axis = "xyz"[op->axis];
  const Expr& launch = block ? f_.grid[op->axis] : f_.block[op->axis];
  const Expr launch_dim = launch.defined() ? launch : make_int(1);
  if (!equal(launch_dim, op->extent)) {
    fail(std::string(for_kind_name(op->kind)) + " loop '" + op->var + "' has extent " + to_string(op->extent) +
         " but the launch's " + (block ? "grid" : "block") + "." + axis + " is " + to_string(launch_dim));
  }
  const std::string builtin = std::string(block ? "blockIdx." : "threadIdx.") + axis;
  std::string value = "static_cast<int64_t>(" + builtin + ")";
  if (!is_const_int(op->min, 0)) value = top(op->min) + " + " + value;
  const bool scoped = declare(op->var);
  line("const int64_t " + c_name(op->var) + " = " + value + ";  // " + for_kind_name(op->kind) + "." + axis +
       " over [0, " + top(op->extent) + ") = " + (block ? "gridDim." : "blockDim.") + axis);
  stmt(op->body);
  if (scoped) {
    close_scope();
    --indent_;
    line("}");
  }
}

void Printer::print_serial(const For* op, bool unroll, const char* comment) {
  const std::string v = c_name(op->var);
  const Expr end = is_const_int(op->min, 0) ? op->extent : op->min + op->extent;
  if (comment) line(std::string("// ") + comment);
  if (unroll) line("#pragma unroll");
  line("for (int64_t " + v + " = " + top(op->min) + "; " + v + " < " + top(end) + "; ++" + v + ") {");
  ++indent_;
  ++divergent_depth_;
  open_scope();
  scopes_.back().insert(v);
  stmt(op->body);
  close_scope();
  --divergent_depth_;
  --indent_;
  line("}");
}

// Finds the vectorizable global accesses of a vectorized loop's body.
class VectorAccesses : public IRVisitor {
 public:
  struct Access {
    const void* node;
    bool is_store;
    std::string buffer;
    DType dtype;
    std::optional<Expr> base;  // set when the index is base + lane with base free of the lane and loads
    // Under a Select arm or the right side of And/Or: the printed lanes evaluate it only where the
    // condition picks it (C's ?:, && and ||), so its index may be out of range elsewhere (cat's
    // `j < n ? a[j] : b[j - n]`). Loaded as a vector only where the loop body also loads the same
    // vector unconditionally.
    bool guarded = false;
  };

  VectorAccesses(const std::string& lane, std::function<bool(const std::string&)> is_global)
      : lane_(lane), is_global_(std::move(is_global)) {}

  std::vector<Access> accesses;

 protected:
  void visit_Load(const Load* op) override {
    if (is_global_(op->buffer)) accesses.push_back({op, false, op->buffer, op->type, analyze(op->index), guarded_ > 0});
    IRVisitor::visit_Load(op);
  }
  void visit_Store(const Store* op) override {
    if (is_global_(op->buffer))
      accesses.push_back({op, true, op->buffer, op->value.type(), analyze(op->index), guarded_ > 0});
    IRVisitor::visit_Store(op);
  }
  void visit_Select(const Select* op) override {
    visit(op->cond);
    ++guarded_;
    visit(op->true_value);
    visit(op->false_value);
    --guarded_;
  }
  void visit_And(const And* op) override { visit_short_circuit(op->a, op->b); }
  void visit_Or(const Or* op) override { visit_short_circuit(op->a, op->b); }
  void visit_LetStmt(const LetStmt* op) override {
    visit(op->value);
    lets_.emplace_back(op->name, op->value);
    visit(op->body);
    lets_.pop_back();
  }
  void visit_IfThenElse(const IfThenElse* op) override {
    visit(op->cond);
    ++conditional_;
    visit(op->then_case);
    visit(op->else_case);
    --conditional_;
  }

 private:
  std::optional<Expr> analyze(const Expr& index) const {
    if (conditional_) return std::nullopt;
    Expr e = index;
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) e = substitute(e, it->first, it->second);
    const auto l = linear_in(e, lane_);
    if (!l || l->coef != 1) return std::nullopt;
    const Expr base = l->base.defined() ? l->base : make_zero(index.type());
    if (has_load(base)) return std::nullopt;
    return base;
  }

  void visit_short_circuit(const Expr& a, const Expr& b) {
    visit(a);
    ++guarded_;
    visit(b);
    --guarded_;
  }

  const std::string& lane_;
  std::function<bool(const std::string&)> is_global_;
  std::vector<std::pair<std::string, Expr>> lets_;
  int conditional_ = 0;  // under an IfThenElse: no vector access at all
  int guarded_ = 0;      // under a Select arm or And/Or's right side
};

// for v in [0, W) vectorized:  one flow::Vec<T, W> access per buffer, lanes in a #pragma unroll loop.
void Printer::print_vectorized(const For* op) {
  const int64_t* width = as_const_int(op->extent);
  if (!width) fail("vectorized loop '" + op->var + "' needs a constant extent");
  VectorizableBody shape;
  shape.visit(op->body);
  if (!is_const_int(op->min, 0) || *width < 2 || !shape.ok) {
    print_serial(op, true, "vectorized loop printed unrolled: its body has no vector form");
    return;
  }
  VectorAccesses finder(op->var, [this](const std::string& b) { return is_param_buffer(b); });
  finder.visit(op->body);

  // Buffers whose accesses must stay scalar.
  std::set<std::string> loaded, stored, scalar;
  std::map<std::string, int> stores_per_buffer;
  for (const auto& a : finder.accesses) {
    (a.is_store ? stored : loaded).insert(a.buffer);
    if (a.is_store) ++stores_per_buffer[a.buffer];
    const int64_t bytes = *width * dtype_size(a.dtype);
    const bool pow2 = (bytes & (bytes - 1)) == 0;
    if (!a.base || !pow2 || a.dtype != buffer_type(a.buffer)) scalar.insert(a.buffer);
  }
  for (const auto& b : loaded) {
    if (stored.count(b)) scalar.insert(b);
  }
  // A guarded access is hoisted only where an unguarded one of the same vector makes the load
  // happen anyway (a vector load performs every lane's read, chosen or not).
  for (const auto& a : finder.accesses) {
    if (!a.guarded || !a.base) continue;
    const bool also_unguarded = std::any_of(finder.accesses.begin(), finder.accesses.end(), [&](const auto& u) {
      return !u.guarded && u.is_store == a.is_store && u.buffer == a.buffer && u.base && equal(*u.base, *a.base);
    });
    if (!also_unguarded) scalar.insert(a.buffer);
  }
  for (const auto& [b, n] : stores_per_buffer) {
    if (n > 1) scalar.insert(b);
  }

  struct VecDecl {
    std::string name, buffer;
    DType dtype;
    Expr base;
  };
  std::vector<VecDecl> loads, stores;
  const std::string w = std::to_string(*width);
  const std::string lane = c_name(op->var);
  for (const auto& a : finder.accesses) {
    if (scalar.count(a.buffer)) continue;
    auto& list = a.is_store ? stores : loads;
    const bool known = std::any_of(list.begin(), list.end(),
                                   [&](const VecDecl& d) { return d.buffer == a.buffer && equal(d.base, *a.base); });
    if (!known) list.push_back({"", a.buffer, a.dtype, *a.base});
  }
  // Names: <buffer>_vec, then <buffer>_vec1, ... for further bases; never one visible in scope.
  std::set<std::string> taken;
  for (auto* list : {&loads, &stores}) {
    for (auto& d : *list) {
      const std::string stem = c_name(d.buffer) + "_vec";
      d.name = stem;
      for (int k = 1; taken.count(d.name) || in_scope(d.name); ++k) d.name = stem + std::to_string(k);
      taken.insert(d.name);
    }
  }
  for (const auto& a : finder.accesses) {
    if (scalar.count(a.buffer)) continue;
    const auto& list = a.is_store ? stores : loads;
    for (const auto& d : list) {
      if (d.buffer != a.buffer || !equal(d.base, *a.base)) continue;
      const std::string lane_ref = d.name + ".v[" + lane + "]";
      if (a.is_store) {
        store_vector_[static_cast<const StmtNode*>(a.node)] = lane_ref;
      } else {
        load_vector_[static_cast<const ExprNode*>(a.node)] = lane_ref;
      }
    }
  }

  // The vector form runs only where every vector access is aligned at run time (the same in every
  // thread when the bases are); else the lanes run as scalars.
  std::string aligned;
  for (const auto* list : {&loads, &stores}) {
    for (const auto& d : *list) {
      aligned += (aligned.empty() ? "" : " && ") + std::string("flow::vec_aligned<") + w + ">(" + c_name(d.buffer) +
                 " + " + operand(d.base, kPrecAdd, true, true) + ")";
    }
  }
  if (!aligned.empty()) {
    line("if (" + aligned + ") {");
    ++indent_;
  }
  line("{  // vectorized " + lane + " in [0, " + w + "): " + std::to_string(loads.size()) + " vector load(s), " +
       std::to_string(stores.size()) + " vector store(s)");
  ++indent_;
  open_scope();
  for (const auto& d : loads) {
    line("const flow::Vec<" + std::string(cuda_type_name(d.dtype)) + ", " + w + "> " + d.name + " = flow::load_vec<" +
         w + ">(" + c_name(d.buffer) + " + " + operand(d.base, kPrecAdd, true, true) + ");");
  }
  for (const auto& d : stores)
    line("flow::Vec<" + std::string(cuda_type_name(d.dtype)) + ", " + w + "> " + d.name + ";");
  print_serial(op, true, nullptr);
  for (const auto& d : stores) {
    line("flow::store_vec<" + w + ">(" + c_name(d.buffer) + " + " + operand(d.base, kPrecAdd, true, true) + ", " +
         d.name + ");");
  }
  close_scope();
  --indent_;
  line("}");
  for (const auto& a : finder.accesses) {
    load_vector_.erase(static_cast<const ExprNode*>(a.node));
    store_vector_.erase(static_cast<const StmtNode*>(a.node));
  }
  if (!aligned.empty()) {
    --indent_;
    line("} else {  // a base not aligned for the vectors (a view at an element offset): scalar lanes");
    ++indent_;
    print_serial(op, true, nullptr);
    --indent_;
    line("}");
  }
}

class ReductionTypes : public IRVisitor {
 public:
  std::set<DType> types;

 protected:
  void visit_BlockReduce(const BlockReduce* op) override {
    types.insert(op->dtype == DType::Bool ? DType::Int32 : op->dtype);
  }
};

std::string launch_str(const Expr (&dims)[3]) {
  std::string s = "(";
  for (int i = 0; i < 3; ++i) s += (i ? ", " : "") + (dims[i].defined() ? to_string(dims[i]) : std::string("1"));
  return s + ")";
}

class SharedBytes : public IRVisitor {
 public:
  int64_t bytes = 0;

 protected:
  void visit_Allocate(const Allocate* op) override {
    if (op->scope == MemoryScope::Shared) bytes += op->size * dtype_size(op->dtype);
    IRVisitor::visit_Allocate(op);
  }
};

CudaSource Printer::run() {
  if (f_.target != Target::CUDA) fail("target is " + std::string(target_name(f_.target)) + ", not cuda");
  if (!f_.body.defined()) fail("no body");
  CudaSource out;
  out.name = c_name(f_.name);
  for (int i = 0; i < 3; ++i) {
    out.grid[i] = f_.grid[i].defined() ? f_.grid[i] : make_int(1);
    out.block[i] = f_.block[i].defined() ? f_.block[i] : make_int(1);
  }
  out.block_threads = 1;
  for (const Expr& b : out.block) {
    const int64_t* k = as_const_int(b);
    out.block_threads = k ? out.block_threads * *k : 0;
  }

  ReductionTypes red;
  red.visit(f_.body);
  int64_t scratch_elem = 0;
  for (const DType t : red.types) scratch_elem = std::max<int64_t>(scratch_elem, dtype_size(t));
  SharedBytes shared;
  shared.visit(f_.body);
  out.shared_bytes = shared.bytes + 32 * scratch_elem;

  os_ << "// Generated by flow (jit/cuda/cuda_printer.cpp). Kernel " << f_.name << "\n";
  os_ << "// launch: grid = " << launch_str(f_.grid) << ", block = " << launch_str(f_.block) << "\n";
  os_ << "#include \"flow_helpers.cuh\"\n\n";
  os_ << "extern \"C\" __global__ void ";
  if (out.block_threads > 0) os_ << "__launch_bounds__(" << out.block_threads << ") ";
  os_ << out.name << "(";
  open_scope();
  std::vector<std::string> narrow;  // scalar params narrowed from their 8-byte ABI slot
  for (size_t i = 0; i < f_.params.size(); ++i) {
    const Param& p = f_.params[i];
    if (params_.count(p.name)) fail("duplicate param '" + p.name + "'");
    params_[p.name] = &p;
    const std::string n = c_name(p.name);
    scopes_.back().insert(n);
    os_ << (i ? ",\n    " : "\n    ");
    if (p.kind == ParamKind::Buffer) {
      os_ << (p.is_output ? "" : "const ") << cuda_type_name(p.dtype) << "* __restrict__ " << n;
      continue;
    }
    if (is_half(p.dtype)) fail("scalar param '" + p.name + "' of half type");
    const DType slot = is_floating(p.dtype) ? DType::Float64 : DType::Int64;
    if (slot == p.dtype) {
      os_ << "const " << cuda_type_name(slot) << " " << n;
    } else {
      os_ << "const " << cuda_type_name(slot) << " " << n << "_arg";
      narrow.push_back("const " + std::string(cuda_type_name(p.dtype)) + " " + n + " = static_cast<" +
                       cuda_type_name(p.dtype) + ">(" + n + "_arg);");
    }
  }
  if (dsl::calls_intrinsic(f_.body, Intrinsic::CheckIndex)) {
    if (scopes_.back().count(kErrorWordParam)) fail(std::string("a param is named ") + kErrorWordParam);
    scopes_.back().insert(kErrorWordParam);
    os_ << (f_.params.empty() ? "\n    " : ",\n    ") << "int64_t* __restrict__ " << kErrorWordParam;
  }
  os_ << ") {\n";
  indent_ = 1;
  for (const auto& s : narrow) line(s);
  if (scratch_elem > 0) {
    line("// scratch for flow::block_reduce_* (one slot per warp), shared by every reduction");
    // alignas first: standard C++ puts attributes before the decl-specifiers (the host SIMT
    // emulator in the tests builds this text as C++, with __shared__ as `static`).
    line("alignas(" + std::to_string(scratch_elem) + ") __shared__ unsigned char flow_reduce_scratch[" +
         std::to_string(32 * scratch_elem) + "];");
    for (const DType t : red.types) {
      line(std::string(cuda_type_name(t)) + "* const " + reduce_scratch_name(t) + " = reinterpret_cast<" +
           cuda_type_name(t) + "*>(flow_reduce_scratch);");
    }
  }
  stmt(f_.body);
  indent_ = 0;
  os_ << "}\n";
  close_scope();
  out.source = os_.str();
  return out;
}

}  // namespace

CudaSource print_cuda_source(const LoweredFunc& f) {
  return Printer(f).run();
}

std::string print_cuda(const LoweredFunc& f) {
  return print_cuda_source(f).source;
}

}  // namespace flow::jit::cuda

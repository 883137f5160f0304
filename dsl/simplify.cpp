// Note: a switch-based simplifier (see simplify.h for the rules and assumptions). Each rewrite
// helper (add, sub, mul, ...) takes already-simplified operands and returns a simplified result,
// so a rewrite can build new terms through the helpers and they come out simplified too; when no
// rule fires and the operands are unchanged the original node is returned (sharing preserved).
// Integer canonical forms: constants on the right of + * min max, and a constant offset outermost
// (`x + 3`, or `x - 3` for a negative offset), so offset chains fold.
#include "dsl/simplify.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "dsl/ir_visitor.h"

namespace flow::dsl {

namespace {

// ---- integer constants with dtype wrap-around ----------------------------------------------------

int64_t wrap(int64_t v, DType t) {
  return is_floating(t) ? v : wrap_integer(t, v);
}
int64_t wadd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wsub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wmul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t type_min(DType t) {
  return t == DType::Int32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
}
Expr int_const(int64_t v, DType t) {
  return make_int(wrap(v, t), t);
}

// Float min/max as torch.minimum/maximum (see expr.cpp): NaN propagates, -0.0 < +0.0.
template <class F>
F torch_min(F x, F y) {
  if (std::isnan(x)) return x;
  if (std::isnan(y)) return y;
  if (x == y) return std::signbit(x) ? x : y;
  return x < y ? x : y;
}
template <class F>
F torch_max(F x, F y) {
  if (std::isnan(x)) return x;
  if (std::isnan(y)) return y;
  if (x == y) return std::signbit(x) ? y : x;
  return x > y ? x : y;
}

// ---- bounds of integer expressions -----------------------------------------------------------------

struct Interval {
  bool has_lo = false, has_hi = false;
  int64_t lo = 0, hi = 0;
  static Interval exact(int64_t v) { return {true, true, v, v}; }
  static Interval range(int64_t l, int64_t h) { return {true, true, l, h}; }
  static Interval at_least(int64_t l) { return {true, false, l, 0}; }
  bool nonneg() const { return has_lo && lo >= 0; }
};

// Checked helpers: a side whose arithmetic overflows becomes unknown.
bool cadd(int64_t a, int64_t b, int64_t* r) {
  return !__builtin_add_overflow(a, b, r);
}
bool csub(int64_t a, int64_t b, int64_t* r) {
  return !__builtin_sub_overflow(a, b, r);
}
bool cmul(int64_t a, int64_t b, int64_t* r) {
  return !__builtin_mul_overflow(a, b, r);
}

const int64_t* const_of(const Expr& e) {
  return as_const_int(e);
}

// e == x + c or e == x - c (c constant): returns x and the signed offset; otherwise e and 0.
std::pair<Expr, int64_t> split_offset(const Expr& e) {
  if (const Add* a = e.as<Add>()) {
    if (const int64_t* c = const_of(a->b)) return {a->a, *c};
  }
  if (const Sub* s = e.as<Sub>()) {
    if (const int64_t* c = const_of(s->b)) return {s->a, wrap(wsub(0, *c), e.type())};
  }
  return {e, 0};
}

Expr keep(const Expr* self, const Expr& a, const Expr& b, ExprKind k) {
  if (self) {
    const auto* op = static_cast<const BinaryNode*>(self->get());
    if (op->a.same_as(a) && op->b.same_as(b)) return *self;
  }
  return make_binary(k, a, b);
}

class Simplifier : public IRMutator {
 public:
  // ---- bounds ----
  Interval bounds(const Expr& e) const {
    const DType t = e.type();
    if (t == DType::Bool) {
      if (const int64_t* c = const_of(e)) return Interval::exact(*c);
      return Interval::range(0, 1);
    }
    if (!is_integral(t)) return {};
    switch (e.kind()) {
      case ExprKind::IntImm:
        return Interval::exact(e.as<IntImm>()->value);
      case ExprKind::Var: {
        const std::string& n = e.as<Var>()->name;
        for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
          if (it->first == n) return it->second;
        }
        return Interval::at_least(0);  // free index variable: assumed non-negative
      }
      case ExprKind::Cast: {
        const Expr& v = e.as<Cast>()->value;
        if (v.type() == DType::Bool) return Interval::range(0, 1);
        if (v.type() == DType::UInt8) return Interval::range(0, 255);
        if (v.type() == DType::Int8) return Interval::range(-128, 127);
        if (v.type() == DType::Int16) return Interval::range(-32768, 32767);
        if (!is_integral(v.type())) return {};
        Interval r = bounds(v);
        if (t == DType::Int32) {  // a narrowing cast keeps only bounds that fit
          const bool fits = r.has_lo && r.has_hi && r.lo >= std::numeric_limits<int32_t>::min() &&
                            r.hi <= std::numeric_limits<int32_t>::max();
          if (!fits) return {};
        }
        return r;
      }
      case ExprKind::Add:
      case ExprKind::Sub: {
        const auto* op = static_cast<const BinaryNode*>(e.get());
        const Interval a = bounds(op->a), b = bounds(op->b);
        Interval r;
        if (e.kind() == ExprKind::Add) {
          r.has_lo = a.has_lo && b.has_lo && cadd(a.lo, b.lo, &r.lo);
          r.has_hi = a.has_hi && b.has_hi && cadd(a.hi, b.hi, &r.hi);
        } else {
          r.has_lo = a.has_lo && b.has_hi && csub(a.lo, b.hi, &r.lo);
          r.has_hi = a.has_hi && b.has_lo && csub(a.hi, b.lo, &r.hi);
        }
        return r;
      }
      case ExprKind::Mul: {
        const auto* op = e.as<Mul>();
        const Interval a = bounds(op->a), b = bounds(op->b);
        Interval r;
        if (a.has_lo && a.has_hi && b.has_lo && b.has_hi) {
          int64_t p[4];
          if (!cmul(a.lo, b.lo, &p[0]) || !cmul(a.lo, b.hi, &p[1]) || !cmul(a.hi, b.lo, &p[2]) ||
              !cmul(a.hi, b.hi, &p[3])) {
            return {};
          }
          r = Interval::range(std::min({p[0], p[1], p[2], p[3]}), std::max({p[0], p[1], p[2], p[3]}));
        } else if (a.nonneg() && b.nonneg()) {
          r.has_lo = cmul(a.lo, b.lo, &r.lo);
        } else if (a.nonneg() && b.has_hi && b.hi <= 0 && b.has_lo) {  // non-negative times non-positive
          r.has_hi = cmul(a.lo, b.hi, &r.hi);
        } else if (b.nonneg() && a.has_hi && a.hi <= 0 && a.has_lo) {
          r.has_hi = cmul(b.lo, a.hi, &r.hi);
        }
        return r;
      }
      case ExprKind::Div: {
        const auto* op = e.as<Div>();
        const Interval a = bounds(op->a), b = bounds(op->b);
        if (const int64_t* c = const_of(op->b)) {
          if (*c > 0) return {a.has_lo, a.has_hi, a.lo / *c, a.hi / *c};  // truncation is monotonic
          return {};
        }
        if (a.nonneg() && b.has_lo && b.lo > 0) return {true, a.has_hi, 0, a.hi};
        return {};
      }
      case ExprKind::Mod: {
        const auto* op = e.as<Mod>();
        const Interval a = bounds(op->a), b = bounds(op->b);
        if (!(b.has_lo && b.lo > 0)) return {};
        if (!b.has_hi) return a.nonneg() ? Interval::at_least(0) : Interval{};
        const int64_t m = b.hi - 1;
        if (a.nonneg()) return Interval::range(0, a.has_hi ? std::min(a.hi, m) : m);
        return Interval::range(-m, m);
      }
      case ExprKind::Min:
      case ExprKind::Max: {
        const auto* op = static_cast<const BinaryNode*>(e.get());
        const Interval a = bounds(op->a), b = bounds(op->b);
        Interval r;
        if (e.kind() == ExprKind::Min) {
          r.has_lo = a.has_lo && b.has_lo;
          r.lo = std::min(a.lo, b.lo);
          r.has_hi = a.has_hi || b.has_hi;
          r.hi = a.has_hi && b.has_hi ? std::min(a.hi, b.hi) : (a.has_hi ? a.hi : b.hi);
        } else {
          r.has_hi = a.has_hi && b.has_hi;
          r.hi = std::max(a.hi, b.hi);
          r.has_lo = a.has_lo || b.has_lo;
          r.lo = a.has_lo && b.has_lo ? std::max(a.lo, b.lo) : (a.has_lo ? a.lo : b.lo);
        }
        return r;
      }
      case ExprKind::Select: {
        const auto* op = e.as<Select>();
        const Interval a = bounds(op->true_value), b = bounds(op->false_value);
        return {a.has_lo && b.has_lo, a.has_hi && b.has_hi, std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
      }
      case ExprKind::Call: {
        const auto* op = e.as<Call>();
        if (op->func == Intrinsic::Floor || op->func == Intrinsic::Ceil) return bounds(op->args[0]);
        return {};
      }
      default:
        return {};  // loads and anything else: unknown
    }
  }

  // ---- rewrite helpers (operands already simplified) ----

  // x + c in canonical form (x - |c| for negative c).
  Expr add_const(const Expr& x, int64_t c) {
    const DType t = x.type();
    c = wrap(c, t);
    if (c == 0) return x;
    if (const int64_t* k = const_of(x)) return int_const(wadd(*k, c), t);
    if (c < 0 && c != type_min(t)) return Expr(std::make_shared<const Sub>(t, x, make_int(-c, t)));
    return Expr(std::make_shared<const Add>(t, x, make_int(c, t)));
  }

  Expr add(const Expr& a, const Expr& b, const Expr* self = nullptr) {
    const DType t = a.type();
    if (!is_integral(t)) {
      const double* x = as_const_float(a);
      const double* y = as_const_float(b);
      if (x && y) return fold_float(ExprKind::Add, *x, *y, t);
      return keep(self, a, b, ExprKind::Add);
    }
    const int64_t* ca = const_of(a);
    const int64_t* cb = const_of(b);
    if (ca && cb) return int_const(wadd(*ca, *cb), t);
    if (ca) return add(b, a);
    if (cb) {
      auto [x, c] = split_offset(a);
      return add_const(x, wadd(c, *cb));
    }
    auto [x, c1] = split_offset(a);
    auto [y, c2] = split_offset(b);
    if (c1 != 0 || c2 != 0) return add_const(add(x, y), wadd(c1, c2));
    return keep(self, a, b, ExprKind::Add);
  }

  Expr sub(const Expr& a, const Expr& b, const Expr* self = nullptr) {
    const DType t = a.type();
    if (!is_integral(t)) {
      const double* x = as_const_float(a);
      const double* y = as_const_float(b);
      if (x && y) return fold_float(ExprKind::Sub, *x, *y, t);
      if (y && *y == 0.0 && !std::signbit(*y)) return a;  // x - (+0.0) == x exactly
      return keep(self, a, b, ExprKind::Sub);
    }
    const int64_t* ca = const_of(a);
    const int64_t* cb = const_of(b);
    if (ca && cb) return int_const(wsub(*ca, *cb), t);
    if (cb) {
      auto [x, c] = split_offset(a);
      return add_const(x, wsub(c, *cb));
    }
    if (equal(a, b)) return make_zero(t);
    auto [x, c1] = split_offset(a);
    auto [y, c2] = split_offset(b);
    if (equal(x, y)) return int_const(wsub(c1, c2), t);
    if (c1 != 0 || c2 != 0) return add_const(sub(x, y), wsub(c1, c2));
    if (const Add* s = a.as<Add>()) {  // (p + q) - p -> q, (p + q) - q -> p
      if (equal(s->a, b)) return s->b;
      if (equal(s->b, b)) return s->a;
    }
    return keep(self, a, b, ExprKind::Sub);
  }

  Expr mul(const Expr& a, const Expr& b, const Expr* self = nullptr) {
    const DType t = a.type();
    if (!is_integral(t)) {
      const double* x = as_const_float(a);
      const double* y = as_const_float(b);
      if (x && y) return fold_float(ExprKind::Mul, *x, *y, t);
      if (y && *y == 1.0) return a;
      if (x && *x == 1.0) return b;
      return keep(self, a, b, ExprKind::Mul);
    }
    const int64_t* ca = const_of(a);
    const int64_t* cb = const_of(b);
    if (ca && cb) return int_const(wmul(*ca, *cb), t);
    if (ca) return mul(b, a);
    if (cb) {
      if (*cb == 0) return make_zero(t);
      if (*cb == 1) return a;
      if (const Mul* m = a.as<Mul>()) {
        if (const int64_t* c1 = const_of(m->b)) return mul(m->a, int_const(wmul(*c1, *cb), t));
      }
      auto [x, c] = split_offset(a);
      if (c != 0) return add_const(mul(x, b), wmul(c, *cb));  // (x + c) * k -> x*k + c*k
    }
    return keep(self, a, b, ExprKind::Mul);
  }

  // p is a known multiple of c (> 0): a constant multiple, x * (k*c), or a sum/difference of those.
  static bool multiple_of(const Expr& p, int64_t c) {
    if (const int64_t* k = const_of(p)) return *k % c == 0;
    if (const Mul* m = p.as<Mul>()) {
      if (const int64_t* k = const_of(m->b)) return *k % c == 0;
    }
    if (const Add* s = p.as<Add>()) return multiple_of(s->a, c) && multiple_of(s->b, c);
    if (const Sub* s = p.as<Sub>()) return multiple_of(s->a, c) && multiple_of(s->b, c);
    return false;
  }
  // p / c for a multiple_of(p, c): exact, so it distributes over + and - for every sign.
  Expr exact_div(const Expr& p, int64_t c) {
    const DType t = p.type();
    if (const int64_t* k = const_of(p)) return int_const(*k / c, t);
    if (const Mul* m = p.as<Mul>()) return mul(m->a, int_const(*const_of(m->b) / c, t));
    if (const Add* s = p.as<Add>()) return add(exact_div(s->a, c), exact_div(s->b, c));
    const Sub* s = p.as<Sub>();
    return sub(exact_div(s->a, c), exact_div(s->b, c));
  }

  Expr div(const Expr& a, const Expr& b, const Expr* self = nullptr) {
    const DType t = a.type();
    if (!is_integral(t)) {
      const double* x = as_const_float(a);
      const double* y = as_const_float(b);
      if (x && y) return fold_float(ExprKind::Div, *x, *y, t);
      if (y && *y == 1.0) return a;
      return keep(self, a, b, ExprKind::Div);
    }
    const int64_t* ca = const_of(a);
    const int64_t* cb = const_of(b);
    if (ca && cb && *cb != 0 && !(*ca == type_min(t) && *cb == -1)) return int_const(*ca / *cb, t);
    if (cb && *cb == 1) return a;
    if (cb && *cb > 0) {
      const int64_t c = *cb;
      if (const Mul* m = a.as<Mul>()) {
        if (const int64_t* k = const_of(m->b); k && *k > 0) {
          if (*k % c == 0) return mul(m->a, int_const(*k / c, t));  // (x*k)/c, c | k
          if (c % *k == 0) return div(m->a, int_const(c / *k, t));  // (x*k)/c, k | c
        }
      }
      if (multiple_of(a, c)) return exact_div(a, c);
      if (const Div* d = a.as<Div>()) {  // (x / k) / c -> x / (k*c)
        int64_t kc;
        if (const int64_t* k = const_of(d->b); k && *k > 0 && cmul(*k, c, &kc) && wrap(kc, t) == kc) {
          return div(d->a, int_const(kc, t));
        }
      }
      const Interval r = bounds(a);
      if (r.has_lo && r.has_hi && r.lo > -c && r.hi < c) return make_zero(t);
      // (p + q) / c -> p/c + q/c when c | p and p, q >= 0 (truncation equals floor there)
      if (const Add* s = a.as<Add>()) {
        for (int side = 0; side < 2; ++side) {
          const Expr& p = side == 0 ? s->a : s->b;
          const Expr& q = side == 0 ? s->b : s->a;
          if (multiple_of(p, c) && bounds(p).nonneg() && bounds(q).nonneg()) {
            return add(div(p, b), div(q, b));
          }
        }
      }
    }
    return keep(self, a, b, ExprKind::Div);
  }

  Expr mod(const Expr& a, const Expr& b, const Expr* self = nullptr) {
    const DType t = a.type();
    if (!is_integral(t)) {
      const double* x = as_const_float(a);
      const double* y = as_const_float(b);
      if (x && y) return fold_float(ExprKind::Mod, *x, *y, t);
      return keep(self, a, b, ExprKind::Mod);
    }
    const int64_t* ca = const_of(a);
    const int64_t* cb = const_of(b);
    if (ca && cb && *cb != 0 && !(*ca == type_min(t) && *cb == -1)) return int_const(*ca % *cb, t);
    if (cb && *cb == 1) return make_zero(t);
    if (cb && *cb > 0) {
      const int64_t c = *cb;
      if (multiple_of(a, c)) return make_zero(t);  // (x*k) % c, c | k: true for every sign of x
      if (const Mod* m = a.as<Mod>()) {            // (x % k) % c -> x % c when c | k
        if (const int64_t* k = const_of(m->b); k && *k > 0 && *k % c == 0) return mod(m->a, b);
      }
      const Interval r = bounds(a);
      if (r.nonneg() && r.has_hi && r.hi < c) return a;
      if (const Add* s = a.as<Add>()) {  // (p + q) % c -> q % c when c | p and p, q >= 0
        for (int side = 0; side < 2; ++side) {
          const Expr& p = side == 0 ? s->a : s->b;
          const Expr& q = side == 0 ? s->b : s->a;
          if (multiple_of(p, c) && bounds(p).nonneg() && bounds(q).nonneg()) return mod(q, b);
        }
      }
    }
    return keep(self, a, b, ExprKind::Mod);
  }

  Expr minmax(ExprKind k, const Expr& a, const Expr& b, const Expr* self = nullptr) {
    const bool is_min = k == ExprKind::Min;
    const DType t = a.type();
    if (equal(a, b)) return a;
    if (is_floating(t)) {
      const double* x = as_const_float(a);
      const double* y = as_const_float(b);
      if (x && y) return fold_float(k, *x, *y, t);
      return keep(self, a, b, k);
    }
    const int64_t* ca = const_of(a);
    const int64_t* cb = const_of(b);
    if (ca && cb) return make_int(is_min ? std::min(*ca, *cb) : std::max(*ca, *cb), t);
    if (ca) return minmax(k, b, a);
    const Interval x = bounds(a), y = bounds(b);
    if (x.has_hi && y.has_lo && x.hi <= y.lo) return is_min ? a : b;
    if (y.has_hi && x.has_lo && y.hi <= x.lo) return is_min ? b : a;
    if (cb && a.kind() == k) {  // min(min(x, c1), c2) -> min(x, min(c1, c2))
      const auto* inner = static_cast<const BinaryNode*>(a.get());
      if (const int64_t* c1 = const_of(inner->b)) {
        return minmax(k, inner->a, make_int(is_min ? std::min(*c1, *cb) : std::max(*c1, *cb), t));
      }
    }
    return keep(self, a, b, k);
  }

  Expr compare(ExprKind k, const Expr& a, const Expr& b, const Expr* self = nullptr) {
    const DType t = a.type();
    const bool fl = is_floating(t);
    if (fl) {
      const double* x = as_const_float(a);
      const double* y = as_const_float(b);
      if (x && y) return make_bool(cmp_values(k, *x, *y));
      return keep(self, a, b, k);
    }
    const int64_t* ca = const_of(a);
    const int64_t* cb = const_of(b);
    if (ca && cb) return make_bool(cmp_values(k, *ca, *cb));
    if (equal(a, b)) return make_bool(k == ExprKind::EQ || k == ExprKind::LE || k == ExprKind::GE);
    if (is_integral(t)) {  // decide from the bounds of a - b
      const Interval d = bounds(sub(a, b));
      const bool neg = d.has_hi && d.hi < 0, pos = d.has_lo && d.lo > 0;
      const bool nonpos = d.has_hi && d.hi <= 0, nonneg = d.has_lo && d.lo >= 0;
      switch (k) {
        case ExprKind::LT:
          if (neg || nonneg) return make_bool(neg);
          break;
        case ExprKind::LE:
          if (nonpos || pos) return make_bool(nonpos);
          break;
        case ExprKind::GT:
          if (pos || nonpos) return make_bool(pos);
          break;
        case ExprKind::GE:
          if (nonneg || neg) return make_bool(nonneg);
          break;
        case ExprKind::EQ:
          if (neg || pos) return make_bool(false);
          break;
        case ExprKind::NE:
          if (neg || pos) return make_bool(true);
          break;
        default:
          break;
      }
    }
    return keep(self, a, b, k);
  }

  Expr logic(ExprKind k, const Expr& a, const Expr& b, const Expr* self = nullptr) {
    const bool is_and = k == ExprKind::And;
    const int64_t* ca = const_of(a);
    const int64_t* cb = const_of(b);
    // Expressions are pure, so the constant side decides regardless of evaluation order.
    if (ca) return (*ca != 0) == is_and ? b : a;
    if (cb) return (*cb != 0) == is_and ? a : b;
    if (equal(a, b)) return a;
    return keep(self, a, b, k);
  }

  Expr not_(const Expr& a, const Expr* self = nullptr) {
    if (const int64_t* c = const_of(a)) return make_bool(*c == 0);
    if (const Not* n = a.as<Not>()) return n->a;
    if (const auto* op = dynamic_cmp(a); op && !is_floating(op->a.type())) {  // not valid with NaN
      static const ExprKind inv[] = {ExprKind::NE, ExprKind::EQ, ExprKind::GE,
                                     ExprKind::GT, ExprKind::LE, ExprKind::LT};
      const int i = static_cast<int>(a.kind()) - static_cast<int>(ExprKind::EQ);
      return make_binary(inv[i], op->a, op->b);
    }
    if (self && self->as<Not>()->a.same_as(a)) return *self;
    return !a;
  }

  // ---- folding ----

  static Expr fold_float(ExprKind k, double x, double y, DType t) {
    if (t == DType::Float32) {
      const float a = static_cast<float>(x), b = static_cast<float>(y);
      float r = 0;
      switch (k) {
        case ExprKind::Add:
          r = a + b;
          break;
        case ExprKind::Sub:
          r = a - b;
          break;
        case ExprKind::Mul:
          r = a * b;
          break;
        case ExprKind::Div:
          r = a / b;
          break;
        case ExprKind::Mod:
          r = std::fmod(a, b);
          break;
        case ExprKind::Min:
          r = torch_min(a, b);
          break;
        case ExprKind::Max:
          r = torch_max(a, b);
          break;
        default:
          break;
      }
      return make_float(r, t);
    }
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
        r = torch_min(x, y);
        break;
      case ExprKind::Max:
        r = torch_max(x, y);
        break;
      default:
        break;
    }
    return make_float(r, t);
  }

  template <class V>
  static bool cmp_values(ExprKind k, V a, V b) {
    switch (k) {
      case ExprKind::EQ:
        return a == b;
      case ExprKind::NE:
        return a != b;
      case ExprKind::LT:
        return a < b;
      case ExprKind::LE:
        return a <= b;
      case ExprKind::GT:
        return a > b;
      case ExprKind::GE:
        return a >= b;
      default:
        return false;
    }
  }

  static const BinaryNode* dynamic_cmp(const Expr& e) {
    const ExprKind k = e.kind();
    const bool is_cmp = k == ExprKind::EQ || k == ExprKind::NE || k == ExprKind::LT || k == ExprKind::LE ||
                        k == ExprKind::GT || k == ExprKind::GE;
    return is_cmp ? static_cast<const BinaryNode*>(e.get()) : nullptr;
  }

  static Expr fold_cast(DType to, const Expr& v) {
    if (is_storage_only(to)) return Expr();
    if (const int64_t* c = const_of(v)) {
      if (to == DType::Bool || is_integral(to)) return make_int(wrap(*c, to), to);
      if (to == DType::Float32) return make_float(static_cast<float>(*c), to);  // one rounding
      return make_float(static_cast<double>(*c), to);
    }
    if (const double* f = as_const_float(v)) {
      if (to == DType::Bool) return make_bool(*f != 0.0);
      if (is_floating(to)) return make_float(*f, to);
      // float -> int truncates; out of range (and NaN) is undefined in C, so it is left alone
      const double lo = to == DType::Int32 ? -2147483649.0 : -9223372036854775808.0;
      const double hi = to == DType::Int32 ? 2147483648.0 : 9223372036854775808.0;
      if (*f > lo && *f < hi) return make_int(static_cast<int64_t>(*f), to);
    }
    return Expr();
  }

  static Expr fold_call(const Call* op) {
    const Expr& x = op->args[0];
    const DType t = x.type();
    if (op->func == Intrinsic::CheckIndex) {  // a constant in range needs no check; anything else stays
      const int64_t *i = const_of(x), *lo = const_of(op->args[1]), *hi = const_of(op->args[2]);
      return i && lo && hi && *lo <= *i && *i < *hi ? x : Expr();
    }
    if (is_integral(t)) {
      if (op->func == Intrinsic::Floor || op->func == Intrinsic::Ceil) return x;
      const int64_t* c = const_of(x);
      if (!c) return Expr();
      if (op->func == Intrinsic::Neg) return int_const(wsub(0, *c), t);
      if (op->func == Intrinsic::Abs) return int_const(*c < 0 ? wsub(0, *c) : *c, t);
      return Expr();
    }
    const double* f = as_const_float(x);
    if (!f) return Expr();
    // Only the correctly rounded operations fold; exp, tanh, ... may differ on the device.
    const bool f32 = t == DType::Float32;
    switch (op->func) {
      case Intrinsic::Neg:
        return make_float(-*f, t);
      case Intrinsic::Abs:
        return make_float(std::fabs(*f), t);
      case Intrinsic::Floor:
        return make_float(std::floor(*f), t);
      case Intrinsic::Ceil:
        return make_float(std::ceil(*f), t);
      case Intrinsic::IsNan:
        return make_bool(std::isnan(*f));
      case Intrinsic::Sqrt:
        return make_float(f32 ? std::sqrt(static_cast<float>(*f)) : std::sqrt(*f), t);
      default:
        return Expr();
    }
  }

 protected:
  // ---- expression overrides ----
  Expr mutate_Cast(const Cast* op, const Expr& self) override {
    Expr v = mutate(op->value);
    if (Expr f = fold_cast(op->type, v); f.defined()) return f;
    return v.same_as(op->value) ? self : cast(op->type, v);
  }
#define FLOW_BIN(name, call_expr)                                 \
  Expr mutate_##name(const name* op, const Expr& self) override { \
    const Expr a = mutate(op->a);                                 \
    const Expr b = mutate(op->b);                                 \
    return same_or(call_expr, self);                              \
  }
  FLOW_BIN(Add, add(a, b, &self))
  FLOW_BIN(Sub, sub(a, b, &self))
  FLOW_BIN(Mul, mul(a, b, &self))
  FLOW_BIN(Div, div(a, b, &self))
  FLOW_BIN(Mod, mod(a, b, &self))
  FLOW_BIN(Min, minmax(ExprKind::Min, a, b, &self))
  FLOW_BIN(Max, minmax(ExprKind::Max, a, b, &self))
  FLOW_BIN(EQ, compare(ExprKind::EQ, a, b, &self))
  FLOW_BIN(NE, compare(ExprKind::NE, a, b, &self))
  FLOW_BIN(LT, compare(ExprKind::LT, a, b, &self))
  FLOW_BIN(LE, compare(ExprKind::LE, a, b, &self))
  FLOW_BIN(GT, compare(ExprKind::GT, a, b, &self))
  FLOW_BIN(GE, compare(ExprKind::GE, a, b, &self))
  FLOW_BIN(And, logic(ExprKind::And, a, b, &self))
  FLOW_BIN(Or, logic(ExprKind::Or, a, b, &self))
#undef FLOW_BIN
  Expr mutate_Not(const Not* op, const Expr& self) override {
    return not_(mutate(op->a), &self);
  }
  Expr mutate_Select(const Select* op, const Expr& self) override {
    Expr c = mutate(op->cond);
    Expr t = mutate(op->true_value);
    Expr f = mutate(op->false_value);
    if (const int64_t* k = const_of(c)) return *k ? t : f;
    if (equal(t, f)) return t;
    if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
    return select(c, t, f);
  }
  Expr mutate_Call(const Call* op, const Expr& self) override {
    Expr e = IRMutator::mutate_Call(op, self);
    const Call* c = e.as<Call>();
    if (!c) return e;
    if (Expr f = fold_call(c); f.defined()) return f;
    if (c->func == Intrinsic::Neg) {  // -(-x) -> x, exact for every type
      if (const Call* inner = c->args[0].as<Call>(); inner && inner->func == Intrinsic::Neg) return inner->args[0];
    }
    return e;
  }

  // A rewrite that rebuilt the node unchanged returns the original (cheap: children compare by
  // pointer first).
  static Expr same_or(const Expr& r, const Expr& self) {
    return !r.same_as(self) && r.kind() == self.kind() && equal(r, self) ? self : r;
  }

  // ---- statement overrides (an undefined result means "nothing left") ----
  Stmt mutate_For(const For* op, const Stmt& self) override {
    Expr mn = mutate(op->min);
    Expr ext = mutate(op->extent);
    const int64_t* ce = const_of(ext);
    if (ce && *ce <= 0) return Stmt();
    const bool trivial_kind =
        op->kind == ForKind::Serial || op->kind == ForKind::Unrolled || op->kind == ForKind::Vectorized;
    if (ce && *ce == 1 && trivial_kind) return mutate(make_let(op->var, mn, op->body));
    const Interval m = bounds(mn), x = bounds(ext);
    Interval r;
    r.has_lo = m.has_lo;
    r.lo = m.lo;
    r.has_hi = m.has_hi && x.has_hi && cadd(m.hi, x.hi - 1, &r.hi);
    scope_.emplace_back(op->var, r);
    Stmt body = mutate(op->body);
    scope_.pop_back();
    if (!body.defined()) return Stmt();
    if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return self;
    return make_for(op->var, mn, ext, op->kind, body, op->axis);
  }
  Stmt mutate_LetStmt(const LetStmt* op, const Stmt& self) override {
    Expr v = mutate(op->value);
    const Var* vv = v.as<Var>();
    const bool inline_it = v.as<IntImm>() || v.as<FloatImm>() || (vv && !binds(op->body, vv->name));
    if (inline_it) return mutate(substitute(op->body, op->name, v));
    scope_.emplace_back(op->name, bounds(v));
    Stmt body = mutate(op->body);
    scope_.pop_back();
    if (!body.defined()) return Stmt();
    if (!uses(body, op->name)) return body;
    if (v.same_as(op->value) && body.same_as(op->body)) return self;
    return make_let(op->name, v, body);
  }
  Stmt mutate_IfThenElse(const IfThenElse* op, const Stmt& self) override {
    Expr c = mutate(op->cond);
    if (const int64_t* k = const_of(c)) return mutate(*k ? op->then_case : op->else_case);
    Stmt t = mutate(op->then_case);
    Stmt e = mutate(op->else_case);
    if (!t.defined() && !e.defined()) return Stmt();
    if (!t.defined()) return make_if(not_(c), e);
    if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
    return make_if(c, t, e);
  }
  Stmt mutate_Allocate(const Allocate* op, const Stmt& self) override {
    Stmt body = mutate(op->body);
    if (!body.defined()) return Stmt();
    return body.same_as(op->body) ? self : make_allocate(op->name, op->dtype, op->size, op->scope, body);
  }
  Stmt mutate_Block(const Block* op, const Stmt& self) override {
    std::vector<Stmt> stmts;
    stmts.reserve(op->stmts.size());
    bool changed = false;
    for (const Stmt& s : op->stmts) {
      stmts.push_back(mutate(s));
      changed = changed || !stmts.back().same_as(s);
    }
    if (!changed) return self;
    Stmt b = make_block(std::move(stmts));
    if (const Block* blk = b.as<Block>(); blk && blk->stmts.empty()) return Stmt();
    return b;
  }

 private:
  // Whether `s` binds `name` (a For variable or a LetStmt) anywhere: inlining a Var of that name
  // below such a binder would capture it.
  static bool binds(const Stmt& s, const std::string& name) {
    struct Finder : IRVisitor {
      const std::string& n;
      bool found = false;
      explicit Finder(const std::string& nm) : n(nm) {}
      void visit_For(const For* op) override {
        found = found || op->var == n;
        IRVisitor::visit_For(op);
      }
      void visit_LetStmt(const LetStmt* op) override {
        found = found || op->name == n;
        IRVisitor::visit_LetStmt(op);
      }
    } f(name);
    f.visit(s);
    return f.found;
  }
  static bool uses(const Stmt& s, const std::string& name) {
    struct Finder : IRVisitor {
      const std::string& n;
      bool found = false;
      explicit Finder(const std::string& nm) : n(nm) {}
      void visit_Var(const Var* op) override { found = found || op->name == n; }
    } f(name);
    f.visit(s);
    return f.found;
  }

  std::vector<std::pair<std::string, Interval>> scope_;
};

}  // namespace

Expr simplify(const Expr& e) {
  return Simplifier().mutate(e);
}

Stmt simplify(const Stmt& s) {
  Stmt r = Simplifier().mutate(s);
  return r.defined() ? r : make_block({});
}

}  // namespace flow::dsl

// Tests of the simplifier: each identity, constant folding per dtype, index arithmetic, statement
// rules, and a randomized check that simplification preserves the value of integer index
// expressions (evaluated by a tiny local evaluator with C semantics).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "dsl/ir_visitor.h"
#include "dsl/simplify.h"
#include "test_util.h"

namespace flow::dsl {
namespace {

Expr i32(int64_t v) {
  return make_int(v, DType::Int32);
}
Expr f32(double v) {
  return make_float(v, DType::Float32);
}
Expr f64(double v) {
  return make_float(v, DType::Float64);
}
std::string S(const Expr& e) {
  return to_string(simplify(e));
}

TEST(Simplify, IntegerIdentities) {
  Expr x = var("x"), y = var("y");
  EXPECT_EQ(S(x + 0), "x");
  EXPECT_EQ(S(0 + x), "x");
  EXPECT_EQ(S(x - 0), "x");
  EXPECT_EQ(S(x * 1), "x");
  EXPECT_EQ(S(1 * x), "x");
  EXPECT_EQ(S(x * 0), "0");
  EXPECT_EQ(S(x - x), "0");
  EXPECT_EQ(S(x / 1), "x");
  EXPECT_EQ(S(x % 1), "0");
  EXPECT_EQ(S(min(x, x)), "x");
  EXPECT_EQ(S(max(x * 2, x * 2)), "x * 2");
  EXPECT_EQ(S(select(make_bool(true), x, y)), "x");
  EXPECT_EQ(S(select(make_bool(false), x, y)), "y");
  EXPECT_EQ(S(select(x < y, x + 1, 1 + x)), "x + 1");
  EXPECT_EQ(S((x + 3) + 4), "x + 7");
  EXPECT_EQ(S((x + 3) - 5), "x - 2");
  EXPECT_EQ(S((x - 3) + 3), "x");
  EXPECT_EQ(S((x * 2) * 3), "x * 6");
  EXPECT_EQ(S(3 + x), "x + 3");
  EXPECT_EQ(S((x + 1) + (y + 2)), "x + y + 3");
  EXPECT_EQ(S((x + 5) - (x + 2)), "3");
  EXPECT_EQ(S((x + y) - x), "y");
  EXPECT_EQ(S(!!(x < y)), "x < y");
  EXPECT_EQ(S(!(x < y)), "x >= y");
  EXPECT_EQ(S((x < y) && make_bool(true)), "x < y");
  EXPECT_EQ(S((x < y) || make_bool(true)), "true");
  EXPECT_EQ(S(call(Intrinsic::Floor, {x})), "x");
  EXPECT_EQ(S(-(-x)), "x");
  EXPECT_EQ(S(x == x), "true");
  EXPECT_EQ(S(x < x), "false");
  // Int32 expressions keep their type.
  Expr a = var("a", DType::Int32);
  Expr r = simplify((a + 3) + 4);
  EXPECT_EQ(r.type(), DType::Int32);
  EXPECT_EQ(to_string(r), "a + int32(7)");
}

TEST(Simplify, FloatResultsNeverChange) {
  Expr x = var("x", DType::Float32);
  // Exact identities apply...
  EXPECT_EQ(S(x * f32(1)), "x");
  EXPECT_EQ(S(x / f32(1)), "x");
  EXPECT_EQ(S(x - f32(0)), "x");
  EXPECT_EQ(S(min(x, x)), "x");
  // ...inexact ones do not: x + 0 is wrong for -0, x * 0 for inf/NaN, x - x for inf/NaN.
  EXPECT_EQ(S(x + f32(0)), "x + 0.0f");
  EXPECT_EQ(S(x * f32(0)), "x * 0.0f");
  EXPECT_EQ(S(x - x), "x - x");
  EXPECT_EQ(S(x - f32(-0.0)), "x - -0.0f");
  EXPECT_EQ(S(x == x), "x == x");
  EXPECT_EQ(S(!(x < x)), "!(x < x)");
  // No reassociation: (x + 1) + 2 stays.
  EXPECT_EQ(S((x + f32(1)) + f32(2)), "x + 1.0f + 2.0f");
  EXPECT_EQ(S((x * f32(2)) * f32(3)), "x * 2.0f * 3.0f");
  // Transcendentals are not folded (the device library may round differently).
  EXPECT_EQ(S(call(Intrinsic::Exp, {f32(1)})), "exp(1.0f)");
}

TEST(Simplify, ConstantFoldingPerDType) {
  const int32_t imax = std::numeric_limits<int32_t>::max();
  const int32_t imin = std::numeric_limits<int32_t>::min();
  EXPECT_TRUE(is_const_int(simplify(i32(imax) + i32(1)), imin));
  EXPECT_TRUE(is_const_int(simplify(i32(imin) - i32(1)), imax));
  EXPECT_TRUE(is_const_int(simplify(i32(65536) * i32(65536)), 0));
  EXPECT_EQ(simplify(i32(imax) + i32(1)).type(), DType::Int32);
  const int64_t lmax = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(is_const_int(simplify(Expr(lmax) + Expr(1)), std::numeric_limits<int64_t>::min()));
  EXPECT_TRUE(is_const_int(simplify(i32(65536) * i32(65536) / i32(3)), 0));
  EXPECT_TRUE(is_const_int(simplify(Expr(int64_t{65536}) * Expr(65536)), int64_t{1} << 32));
  // C truncation
  EXPECT_TRUE(is_const_int(simplify(Expr(-7) / Expr(2)), -3));
  EXPECT_TRUE(is_const_int(simplify(Expr(-7) % Expr(2)), -1));
  EXPECT_TRUE(is_const_int(simplify(Expr(7) % Expr(-2)), 1));
  // undefined operations are left alone
  EXPECT_EQ(S(Expr(1) / Expr(0)), "1 / 0");
  EXPECT_EQ(S(i32(imin) / i32(-1)), "int32(-2147483648) / int32(-1)");
  // float32 rounds every step to float; float64 does not
  const double s32 = *as_const_float(simplify(f32(0.1) + f32(0.2)));
  EXPECT_EQ(s32, static_cast<double>(0.1f + 0.2f));
  EXPECT_EQ(*as_const_float(simplify(f64(0.1) + f64(0.2))), 0.1 + 0.2);
  EXPECT_NE(static_cast<double>(0.1f + 0.2f), 0.1 + 0.2);
  EXPECT_EQ(*as_const_float(simplify(f32(1) / f32(3))), static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(*as_const_float(simplify(f32(16777216) + f32(1))), 16777216.0);
  EXPECT_EQ(*as_const_float(simplify(f64(16777216) + f64(1))), 16777217.0);
  EXPECT_EQ(*as_const_float(simplify(f32(7.5) % f32(2))), 1.5);
  EXPECT_EQ(*as_const_float(simplify(call(Intrinsic::Sqrt, {f32(2)}))), static_cast<double>(std::sqrt(2.0f)));
  EXPECT_TRUE(std::isinf(*as_const_float(simplify(f32(1) / f32(0)))));
  // comparisons, logic and NaN
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(S(f32(nan) == f32(nan)), "false");
  EXPECT_EQ(S(f32(nan) != f32(nan)), "true");
  EXPECT_EQ(S(call(Intrinsic::IsNan, {f64(nan)})), "true");
  EXPECT_EQ(S(Expr(3) < Expr(4) && Expr(5) >= Expr(6)), "false");
  EXPECT_EQ(S(!(i32(2) == i32(2))), "false");
  // casts: int32 wraps, float -> int truncates, float32 rounds
  EXPECT_TRUE(is_const_int(simplify(cast(DType::Int32, Expr(int64_t{1} << 32) + Expr(5))), 5));
  EXPECT_TRUE(is_const_int(simplify(cast(DType::Int64, f64(-2.7))), -2));
  EXPECT_TRUE(is_const_int(simplify(cast(DType::Bool, Expr(7))), 1));
  EXPECT_EQ(*as_const_float(simplify(cast(DType::Float32, f64(0.1)))), static_cast<double>(0.1f));
  EXPECT_EQ(*as_const_float(simplify(cast(DType::Float32, Expr(16777217)))), 16777216.0);
  EXPECT_EQ(S(cast(DType::Int32, f64(1e20))), "int32(1e+20)");  // out of range: undefined, not folded
  EXPECT_EQ(simplify(cast(DType::Float16, f32(1))).kind(), ExprKind::Cast);
  // intrinsics on constants
  EXPECT_TRUE(is_const_int(simplify(call(Intrinsic::Abs, {i32(-5)})), 5));
  EXPECT_TRUE(is_const_int(simplify(-i32(std::numeric_limits<int32_t>::min())), std::numeric_limits<int32_t>::min()));
  EXPECT_EQ(*as_const_float(simplify(call(Intrinsic::Floor, {f32(-1.5)}))), -2.0);
  // float min/max are torch.minimum/maximum: NaN propagates, -0 < +0
  EXPECT_TRUE(std::isnan(*as_const_float(simplify(min(f32(1), f32(nan))))));
  EXPECT_TRUE(std::isnan(*as_const_float(simplify(max(f64(nan), f64(1))))));
  EXPECT_TRUE(std::signbit(*as_const_float(simplify(min(f32(0.0), f32(-0.0))))));
  EXPECT_FALSE(std::signbit(*as_const_float(simplify(max(f64(-0.0), f64(0.0))))));
  EXPECT_EQ(*as_const_float(simplify(max(f32(-1), f32(2)))), 2.0);
  EXPECT_TRUE(is_const_int(simplify(max(Expr(3), Expr(-4))), 3));
}

TEST(Simplify, IndexArithmetic) {
  Expr x = var("x"), y = var("y"), n = var("n");
  Expr ld = load(DType::Int64, "idx", Expr(0));  // unknown sign
  EXPECT_EQ(S((x * 4) / 4), "x");
  EXPECT_EQ(S((x * 4) % 4), "0");
  EXPECT_EQ(S((x * 8) / 4), "x * 2");
  EXPECT_EQ(S((x * 4) / 8), "x / 2");
  EXPECT_EQ(S((x * 8) % 4), "0");
  EXPECT_EQ(S((ld * 4) / 4), "idx[0]");  // exact for every sign
  EXPECT_EQ(S((x / 4) / 8), "x / 32");
  EXPECT_EQ(S((x * 4 + y % 4) / 4), "x");
  EXPECT_EQ(S((x * 4 + y % 4) % 4), "y % 4");
  EXPECT_EQ(S((y % 4 + x * 4) / 4), "x");
  EXPECT_EQ(S((x * 4 + y) / 4), "x + y / 4");
  EXPECT_EQ(S((x * 4 + y) % 4), "y % 4");
  EXPECT_EQ(S((x * 16 + 3) / 16), "x");
  EXPECT_EQ(S((x * 16 + 35) / 16), "x + 2");
  EXPECT_EQ(S((x % 8) % 4), "x % 4");
  EXPECT_EQ(S((x % 4) / 4), "0");
  EXPECT_EQ(S((x % 4) % 8), "x % 4");
  EXPECT_EQ(S(min(x % 4, 4)), "x % 4");
  EXPECT_EQ(S(x % 4 < 4), "true");
  EXPECT_EQ(S(x * 4 + y % 4 < x * 4 + 4), "true");
  EXPECT_EQ(S(x >= 0), "true");
  // Not provable: y may be negative (a load), or the divisor does not divide the multiplier.
  EXPECT_EQ(S((x * 4 + ld) / 4), "(x * 4 + idx[0]) / 4");
  EXPECT_EQ(S((x * 3 + 1) / 2), "(x * 3 + 1) / 2");
  EXPECT_EQ(S((x - 1) / 4 < n), "(x - 1) / 4 < n");
  EXPECT_EQ(S((x - 5) * 4 / 4), "x - 5");
  EXPECT_EQ(S((x * 4 - 4) / 4), "x - 1");
}

TEST(Simplify, Statements) {
  Expr i = var("i"), n = var("n");
  Stmt st = make_store("out", i, make_float(1, DType::Float32));
  // extent 0 (and negative) loops vanish
  EXPECT_EQ(to_string(simplify(make_for("i", 0, 0, ForKind::Serial, st))), "");
  EXPECT_EQ(to_string(simplify(make_block({make_for("i", 0, Expr(3) - 5, ForKind::Parallel, st), st}))),
            "out[i] = 1.0f;\n");
  // extent 1 loops become the body at min
  for (ForKind k : {ForKind::Serial, ForKind::Unrolled, ForKind::Vectorized}) {
    EXPECT_EQ(to_string(simplify(make_for("i", 7, 1, k, st))), "out[7] = 1.0f;\n");
  }
  EXPECT_EQ(to_string(simplify(make_for("i", n * 2, 1, ForKind::Serial, st))),
            "let i = n * 2 {\n  out[i] = 1.0f;\n}\n");
  // ...but a GPU loop of extent 1 stays (it binds a thread index)
  EXPECT_EQ(simplify(make_for("i", 0, 1, ForKind::GPUThread, st)).kind(), StmtKind::For);
  // Let of a constant or var is inlined, an unused Let dropped, others kept
  EXPECT_EQ(to_string(simplify(make_let("t", Expr(4), make_store("out", var("t") + 1, var("t"))))), "out[5] = 4;\n");
  EXPECT_EQ(to_string(simplify(make_let("t", n, make_store("out", var("t"), Expr(0))))), "out[n] = 0;\n");
  EXPECT_EQ(to_string(simplify(make_let("t", n + 1, make_store("out", i, Expr(0))))), "out[i] = 0;\n");
  // no capture: t -> i is not inlined below a loop that rebinds i
  Stmt cap = make_let("t", i, make_for("i", 0, n, ForKind::Serial, make_store("out", var("t"), var("i"))));
  EXPECT_EQ(to_string(simplify(cap)), to_string(cap));
  // If with a constant condition
  EXPECT_EQ(to_string(simplify(make_if(Expr(1) < Expr(2), st, make_barrier()))), "out[i] = 1.0f;\n");
  EXPECT_EQ(to_string(simplify(make_if(Expr(3) < Expr(2), st, make_barrier()))), "barrier();\n");
  EXPECT_EQ(to_string(simplify(make_if(Expr(3) < Expr(2), st))), "");
  // loop bounds are known inside the loop: the tail guard of an exact tile disappears
  Stmt tiled = make_for("j", 0, 4, ForKind::Serial, make_if(var("j") < 4, make_store("out", var("j"), Expr(0))));
  EXPECT_EQ(to_string(simplify(tiled)), "for (j = 0; j < 4; j++) {\n  out[j] = 0;\n}\n");
  // a Let-bound variable gets its value's bounds, not the free-var assumption
  Stmt neg = make_let("d", load(DType::Int64, "idx", Expr(0)) - 10,
                      make_if(var("d") >= 0, make_store("out", var("d"), Expr(0))));
  EXPECT_NE(to_string(simplify(neg)).find("if (d >= 0)"), std::string::npos);
  // unchanged statements are returned as is
  Stmt loop = make_for("i", 0, n, ForKind::Parallel, st);
  EXPECT_TRUE(simplify(loop).same_as(loop));
  Expr e = var("a") * 4 + var("b");
  EXPECT_TRUE(simplify(e).same_as(e));
}

// ---- randomized: simplify preserves the value of integer index expressions -----------------------

struct Evaluator {
  std::map<std::string, int64_t> env;
  int64_t eval(const Expr& e) const {
    switch (e.kind()) {
      case ExprKind::IntImm:
        return e.as<IntImm>()->value;
      case ExprKind::Var:
        return env.at(e.as<Var>()->name);
      case ExprKind::Select: {
        const auto* s = e.as<Select>();
        return eval(s->cond) ? eval(s->true_value) : eval(s->false_value);
      }
      case ExprKind::Not:
        return !eval(e.as<Not>()->a);
      default:
        break;
    }
    const auto* b = static_cast<const BinaryNode*>(e.get());
    const int64_t x = eval(b->a), y = eval(b->b);
    switch (e.kind()) {
      case ExprKind::Add:
        return x + y;
      case ExprKind::Sub:
        return x - y;
      case ExprKind::Mul:
        return x * y;
      case ExprKind::Div:
        return x / y;
      case ExprKind::Mod:
        return x % y;
      case ExprKind::Min:
        return std::min(x, y);
      case ExprKind::Max:
        return std::max(x, y);
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
      case ExprKind::And:
        return x && y;
      case ExprKind::Or:
        return x || y;
      default:
        ADD_FAILURE() << "unexpected node " << expr_kind_name(e.kind());
        return 0;
    }
  }
};

class IndexGen {
 public:
  explicit IndexGen(std::mt19937_64& r) : rng_(r) {}
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  Expr leaf() {
    if (pick(0, 2) == 0) return Expr(pick(-8, 16));
    return var(std::string(1, static_cast<char>('a' + pick(0, 3))));
  }
  Expr gen(int depth) {
    if (depth == 0 || pick(0, 4) == 0) return leaf();
    switch (pick(0, 8)) {
      case 0:
        return gen(depth - 1) + gen(depth - 1);
      case 1:
        return gen(depth - 1) - gen(depth - 1);
      case 2:
        return gen(depth - 1) * Expr(pick(-3, 8));  // scaled, as index math is
      case 3:
        return gen(depth - 1) / Expr(pick(1, 9));
      case 4:
        return gen(depth - 1) % Expr(pick(1, 9));
      case 5:
        return min(gen(depth - 1), gen(depth - 1));
      case 6:
        return max(gen(depth - 1), gen(depth - 1));
      case 7:
        return select(cond(depth - 1), gen(depth - 1), gen(depth - 1));
      default:
        return (gen(depth - 1) * Expr(pick(1, 8)) + gen(depth - 1)) / Expr(pick(1, 8));
    }
  }
  Expr cond(int depth) {
    Expr a = gen(depth), b = gen(depth);
    switch (pick(0, 6)) {
      case 0:
        return a < b;
      case 1:
        return a <= b;
      case 2:
        return a == b;
      case 3:
        return a != b;
      case 4:
        return a > b;
      case 5:
        return !(a >= b);
      default:
        return (a < b) && (b < Expr(pick(0, 50)));
    }
  }

 private:
  std::mt19937_64& rng_;
};

TEST(Simplify, RandomIndexExpressionsKeepTheirValue) {
  auto rng = test::rng(7);
  IndexGen gen(rng);
  Evaluator ev;
  int changed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const Expr e = gen.gen(5);
    const Expr s = simplify(e);
    if (!s.same_as(e)) ++changed;
    ASSERT_EQ(s.type(), e.type());
    for (int k = 0; k < 8; ++k) {
      for (const char* name : {"a", "b", "c", "d"}) ev.env[name] = gen.pick(0, k < 4 ? 5 : 1000);
      ASSERT_EQ(ev.eval(s), ev.eval(e)) << "original:   " << to_string(e) << "\nsimplified: " << to_string(s)
                                        << "\na=" << ev.env["a"] << " b=" << ev.env["b"] << " c=" << ev.env["c"]
                                        << " d=" << ev.env["d"];
    }
  }
  EXPECT_GT(changed, 100);  // the generator does produce simplifiable expressions
}

}  // namespace
}  // namespace flow::dsl

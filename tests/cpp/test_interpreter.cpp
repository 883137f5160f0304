// Note: tests of the reference interpreter. Kernels are compared with direct C++ that performs the
// same float32 operations in the same order, so most comparisons are exact (bit for bit); the
// softmax tests also check against a float64 reference with a tolerance. Intermediate products go
// through `volatile` so the compiler cannot contract a*b+c into an FMA in the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/interpreter.h"
#include "test_util.h"

namespace flow::dsl {
namespace {

constexpr DType F32 = DType::Float32;
constexpr DType F64 = DType::Float64;
constexpr DType I32 = DType::Int32;
constexpr DType I64 = DType::Int64;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// ---- helpers -----------------------------------------------------------------------------------

Scalar ev(const Expr& e, const InterpOptions& opt = {}) {
  return eval_expr(e, {}, {}, opt);
}
double evf(const Expr& e, const InterpOptions& opt = {}) {
  return ev(e, opt).f;
}
int64_t evi(const Expr& e) {
  return ev(e).i;
}
Expr f32(double v) {
  return make_float(v, F32);
}
Expr f64(double v) {
  return make_float(v, F64);
}
Expr i32(int64_t v) {
  return make_int(v, I32);
}
Expr ld(const std::string& buf, Expr i, DType t = F32) {
  return load(t, buf, std::move(i));
}
Expr call1(Intrinsic f, Expr a) {
  return call(f, {std::move(a)});
}
Expr v(const std::string& name) {
  return var(name, I64);
}

float fl(double x) {
  return static_cast<float>(x);
}
float exp_f(float x) {
  return static_cast<float>(std::exp(static_cast<double>(x)));
}
// The interpreter's NaN-propagating max as reduce_combine builds it.
float max_f(float a, float b) {
  return (a > b || std::isnan(a)) ? a : b;
}
uint32_t bits_of(float x) {
  uint32_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

Param buf(const std::string& name, DType t, bool out = false) {
  return Param{name, ParamKind::Buffer, t, out};
}
Param scalar(const std::string& name, DType t = I64) {
  return Param{name, ParamKind::Scalar, t, false};
}
ArgValue ptr(void* p) {
  ArgValue a;
  a.ptr = p;
  return a;
}
ArgValue i64(int64_t x) {
  ArgValue a;
  a.i64 = x;
  return a;
}

LoweredFunc func(const std::string& name, std::vector<Param> params, Stmt body, Target target = Target::CPU) {
  LoweredFunc f;
  f.name = name;
  f.target = target;
  f.params = std::move(params);
  f.body = std::move(body);
  return f;
}

std::vector<float> random_floats(std::mt19937_64& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> out(n);
  for (float& x : out) x = d(g);
  return out;
}

// ---- expressions -------------------------------------------------------------------------------

TEST(InterpExpr, Constants) {
  EXPECT_EQ(evi(make_int(-5)), -5);
  EXPECT_EQ(ev(make_int(7, I32)).type, I32);
  EXPECT_EQ(evi(make_bool(true)), 1);
  EXPECT_EQ(evf(f32(0.1)), static_cast<double>(0.1f));
  EXPECT_EQ(evf(f64(0.1)), 0.1);
}

TEST(InterpExpr, VarsAndLoadsThroughCallbacks) {
  const auto lookup = [](const std::string& name) {
    if (name == "k") return Scalar{I64, 6};
    return Scalar{F32, 0, 2.5};
  };
  std::vector<std::string> loaded;
  const auto loader = [&](const std::string& b, int64_t i, DType t) {
    loaded.push_back(b + "[" + std::to_string(i) + "]");
    return Scalar{t, 0, 10.0 * static_cast<double>(i)};
  };
  const Expr e = ld("x", v("k") + 1) + var("y", F32);
  EXPECT_EQ(eval_expr(e, lookup, loader).f, 72.5);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0], "x[7]");
  // A value of another type than the Var node is an error, as is a missing callback.
  EXPECT_THROW(eval_expr(var("k", I32), lookup, loader), std::runtime_error);
  EXPECT_THROW(ev(v("k")), std::runtime_error);
  EXPECT_THROW(ev(ld("x", 0)), std::runtime_error);
}

TEST(InterpExpr, Int32WrapsInt64Wraps) {
  const int64_t imax = std::numeric_limits<int32_t>::max(), imin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(evi(i32(imax) + i32(1)), imin);
  EXPECT_EQ(evi(i32(imin) - i32(1)), imax);
  EXPECT_EQ(evi(i32(65536) * i32(65536)), 0);
  EXPECT_EQ(evi(i32(100000) * i32(100000)), static_cast<int64_t>(1410065408));  // 10^10 mod 2^32
  EXPECT_EQ(evi(-i32(imin)), imin);
  EXPECT_EQ(evi(call1(Intrinsic::Abs, i32(imin))), imin);
  EXPECT_EQ(evi(call1(Intrinsic::Abs, i32(-3))), 3);
  const int64_t lmax = std::numeric_limits<int64_t>::max(), lmin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(evi(make_int(lmax) + 1), lmin);
  EXPECT_EQ(evi(make_int(lmin) / -1), lmin);
  EXPECT_EQ(evi(make_int(lmin) % -1), 0);
  EXPECT_EQ(evi(i32(imin) / i32(-1)), imin);
}

TEST(InterpExpr, IntegerDivModTruncateAndDivByZeroThrows) {
  EXPECT_EQ(evi(make_int(-7) / 2), -3);
  EXPECT_EQ(evi(make_int(-7) % 2), -1);
  EXPECT_EQ(evi(make_int(7) % -2), 1);
  EXPECT_EQ(evi(make_int(7) / -2), -3);
  EXPECT_EQ(evi(i32(-9) / i32(4)), -2);
  EXPECT_THROW(ev(make_int(1) / 0), std::runtime_error);
  EXPECT_THROW(ev(i32(1) % i32(0)), std::runtime_error);
  // Float division by zero is IEEE.
  EXPECT_EQ(evf(f32(1) / f32(0)), kInf);
  EXPECT_TRUE(std::isnan(evf(f32(0) / f32(0))));
  EXPECT_EQ(evf(f32(-7.5) % f32(2)), -1.5);
}

TEST(InterpExpr, Float32RoundsAfterEachOpFloat64MathDoesNot) {
  volatile float a = 0.1f, b = 0.2f, c = 3e38f;
  EXPECT_EQ(evf(f32(0.1) + f32(0.2)), static_cast<double>(a + b));
  EXPECT_EQ(evf(f32(0.1) * f32(0.2)), static_cast<double>(a * b));
  EXPECT_EQ(evf(f32(3e38) * f32(10)), static_cast<double>(c * 10.0f));  // overflows to inf
  EXPECT_EQ(evf(f32(3e38) * f32(10)), kInf);
  const InterpOptions oracle{true};
  EXPECT_EQ(evf(f32(0.1) + f32(0.2), oracle), static_cast<double>(0.1f) + static_cast<double>(0.2f));
  EXPECT_EQ(evf(f32(0.1) * f32(0.2), oracle), static_cast<double>(0.1f) * static_cast<double>(0.2f));
  EXPECT_EQ(evf(f32(3e38) * f32(10), oracle), static_cast<double>(3e38f) * 10.0);
  EXPECT_EQ(evf(call1(Intrinsic::Exp, f32(1)), oracle), std::exp(1.0));
  EXPECT_EQ(evf(call1(Intrinsic::Exp, f32(1))), static_cast<double>(fl(std::exp(1.0))));
}

TEST(InterpExpr, MinMaxPropagateNaN) {
  for (const Expr& nan : {f32(kNaN), f64(kNaN)}) {
    const DType t = nan.type();
    const Expr one = make_float(1, t);
    EXPECT_TRUE(std::isnan(evf(max(nan, one))));
    EXPECT_TRUE(std::isnan(evf(max(one, nan))));
    EXPECT_TRUE(std::isnan(evf(min(nan, one))));
    EXPECT_TRUE(std::isnan(evf(min(one, nan))));
    EXPECT_EQ(evf(max(make_float(-kInf, t), one)), 1.0);
    EXPECT_EQ(evf(min(make_float(-kInf, t), one)), -kInf);
  }
  EXPECT_FALSE(std::signbit(evf(max(f32(-0.0), f32(0.0)))));
  EXPECT_FALSE(std::signbit(evf(max(f32(0.0), f32(-0.0)))));
  EXPECT_TRUE(std::signbit(evf(min(f32(0.0), f32(-0.0)))));
  EXPECT_TRUE(std::signbit(evf(min(f32(-0.0), f32(0.0)))));
  EXPECT_EQ(evi(max(i32(-3), i32(2))), 2);
  EXPECT_EQ(evi(min(make_int(-3), make_int(2))), -3);
}

TEST(InterpExpr, ComparisonsWithNaNAreFalseExceptNE) {
  const Expr nan = f32(kNaN), one = f32(1);
  EXPECT_EQ(evi(nan == nan), 0);
  EXPECT_EQ(evi(nan != nan), 1);
  EXPECT_EQ(evi(nan < one), 0);
  EXPECT_EQ(evi(nan <= one), 0);
  EXPECT_EQ(evi(nan > one), 0);
  EXPECT_EQ(evi(nan >= one), 0);
  EXPECT_EQ(evi(one != nan), 1);
  EXPECT_EQ(evi(f32(kInf) > f32(3e38)), 1);
  EXPECT_EQ(evi(f32(-0.0) == f32(0.0)), 1);
  EXPECT_EQ(evi(i32(-1) < i32(0)), 1);
  EXPECT_EQ(evi(make_int(5) >= make_int(5)), 1);
  EXPECT_EQ(ev(one < f32(2)).type, DType::Bool);
}

TEST(InterpExpr, LogicShortCircuitsAndSelectIsLazy) {
  const Expr boom = (make_int(1) / make_int(0)) == make_int(0);  // throws when evaluated
  EXPECT_EQ(evi(make_bool(true) || boom), 1);
  EXPECT_EQ(evi(make_bool(false) && boom), 0);
  EXPECT_THROW(ev(make_bool(true) && boom), std::runtime_error);
  EXPECT_EQ(evi(!make_bool(false)), 1);
  EXPECT_EQ(evi(make_bool(true) && make_bool(true)), 1);
  EXPECT_EQ(evi(make_bool(false) || make_bool(false)), 0);
  EXPECT_EQ(evi(select(make_bool(false), make_int(1) / make_int(0), make_int(4))), 4);
  EXPECT_EQ(evf(select(f32(1) < f32(2), f32(3), f32(4))), 3.0);
}

TEST(InterpExpr, Casts) {
  EXPECT_EQ(evi(cast(I32, f32(-2.7))), -2);
  EXPECT_EQ(evi(cast(I32, f32(2.7))), 2);
  EXPECT_EQ(evi(cast(I64, f64(-1e10))), -10000000000LL);
  // NaN and out of range: the x86 "integer indefinite" value, the type's minimum.
  const int64_t imin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(evi(cast(I32, f32(kNaN))), imin);
  EXPECT_EQ(evi(cast(I32, f32(3e9))), imin);
  EXPECT_EQ(evi(cast(I32, f32(-3e9))), imin);
  EXPECT_EQ(evi(cast(I32, f32(kInf))), imin);
  EXPECT_EQ(evi(cast(I32, f64(2147483647.9))), 2147483647);
  EXPECT_EQ(evi(cast(I32, f64(-2147483648.9))), imin);
  EXPECT_EQ(evi(cast(I64, f64(1e19))), std::numeric_limits<int64_t>::min());
  // int -> int wraps; -> bool is != 0 (NaN is true).
  EXPECT_EQ(evi(cast(I32, make_int(0x1'0000'0005LL))), 5);
  EXPECT_EQ(evi(cast(I32, make_int(0xFFFF'FFFFLL))), -1);
  EXPECT_EQ(evi(cast(DType::Bool, f32(kNaN))), 1);
  EXPECT_EQ(evi(cast(DType::Bool, f32(-0.0))), 0);
  EXPECT_EQ(evi(cast(DType::Bool, make_int(-4))), 1);
  EXPECT_EQ(evi(cast(I64, make_bool(true))), 1);
  // int -> float rounds once to nearest even.
  EXPECT_EQ(evf(cast(F32, make_int(16777217))), 16777216.0);
  EXPECT_EQ(evf(cast(F32, make_int(16777219))), 16777220.0);
  EXPECT_EQ(evf(cast(F64, make_int((1LL << 53) + 1))), 9007199254740992.0);
  EXPECT_EQ(evf(cast(DType::Float16, make_int(65519))), 65504.0);
  EXPECT_EQ(evf(cast(DType::Float16, make_int(65520))), kInf);
  // 2^24 + 2^16 + 1 is just above a bfloat16 tie: rounding through float32 first would tie to even.
  EXPECT_EQ(evf(cast(DType::BFloat16, make_int((1 << 24) + (1 << 16) + 1))), 16908288.0);
  // float64 -> float16 directly, not via float32 (double rounding would give 1).
  EXPECT_EQ(evf(cast(DType::Float16, f64(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)))),
            1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(evf(cast(F32, f64(0.1))), static_cast<double>(0.1f));
  EXPECT_EQ(evf(cast(F32, f64(0.1)), InterpOptions{true}), 0.1);  // oracle mode: no rounding
}

TEST(InterpExpr, Intrinsics) {
  const auto rf = [](double x) { return static_cast<double>(static_cast<float>(x)); };
  EXPECT_EQ(evf(call1(Intrinsic::Exp, f32(0.5))), rf(std::exp(static_cast<double>(0.5f))));
  EXPECT_EQ(evf(call1(Intrinsic::Log, f32(3))), rf(std::log(3.0)));
  EXPECT_EQ(evf(call1(Intrinsic::Sqrt, f32(2))), rf(std::sqrt(2.0)));
  EXPECT_EQ(evf(call1(Intrinsic::Rsqrt, f32(4))), 0.5);
  EXPECT_EQ(evf(call1(Intrinsic::Rsqrt, f32(3))), rf(1.0 / std::sqrt(3.0)));
  EXPECT_EQ(evf(call1(Intrinsic::Tanh, f32(0.3))), rf(std::tanh(static_cast<double>(0.3f))));
  EXPECT_EQ(evf(call1(Intrinsic::Erf, f32(0.3))), rf(std::erf(static_cast<double>(0.3f))));
  EXPECT_EQ(evf(call(Intrinsic::Pow, {f32(2), f32(0.5)})), rf(std::sqrt(2.0)));
  EXPECT_EQ(evf(call1(Intrinsic::Floor, f32(-1.5))), -2.0);
  EXPECT_EQ(evf(call1(Intrinsic::Ceil, f32(-1.5))), -1.0);
  EXPECT_EQ(evi(call1(Intrinsic::Floor, make_int(-3))), -3);
  EXPECT_EQ(evf(-f32(2)), -2.0);
  EXPECT_TRUE(std::signbit(evf(-f32(0.0))));
  EXPECT_EQ(evf(call1(Intrinsic::Abs, f32(-0.0))), 0.0);
  EXPECT_EQ(evf(call1(Intrinsic::Log, f32(0))), -kInf);
  EXPECT_TRUE(std::isnan(evf(call1(Intrinsic::Sqrt, f32(-1)))));
  EXPECT_TRUE(std::isnan(evf(f32(kInf) - f32(kInf))));
  EXPECT_EQ(evf(call1(Intrinsic::Exp, f32(-kInf))), 0.0);
  EXPECT_EQ(evf(call1(Intrinsic::Exp, f32(100))), kInf);  // overflows float32
  EXPECT_EQ(evf(call1(Intrinsic::Exp, f32(100)), InterpOptions{true}), std::exp(100.0));
  EXPECT_EQ(evf(call1(Intrinsic::Tanh, f32(kInf))), 1.0);
  EXPECT_EQ(evi(call1(Intrinsic::IsNan, f32(kNaN))), 1);
  EXPECT_EQ(evi(call1(Intrinsic::IsNan, f64(kInf))), 0);
  EXPECT_EQ(ev(call1(Intrinsic::IsNan, f32(1))).type, DType::Bool);
  EXPECT_TRUE(std::isnan(evf(call1(Intrinsic::Exp, f32(kNaN)))));
}

// ---- float16 / bfloat16 ------------------------------------------------------------------------

TEST(InterpHalf, KnownValues) {
  EXPECT_EQ(half_bits_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_bits_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_bits_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_bits_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(half_bits_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(half_bits_to_float(0x8000)));
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7E00)));
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(1e10f), 0x7C00);
  EXPECT_EQ(float_to_half_bits(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(bf16_bits_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0x7F7F), std::ldexp(255.0f, 120));
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xFF80);
}

TEST(InterpHalf, TiesRoundToEven) {
  const float u = std::ldexp(1.0f, -11);                     // half of one half-precision ulp at 1
  EXPECT_EQ(float_to_half_bits(1.0f + u), 0x3C00);           // tie, even is 1.0
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * u), 0x3C02);       // tie, even is 1+2^-9
  EXPECT_EQ(float_to_half_bits(1.0f + u + u / 64), 0x3C01);  // above the tie
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7C00);                  // tie between 65504 and 2^16: even is inf
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);     // subnormal tie to 0
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);     // subnormal tie to even
  EXPECT_EQ(float_to_half_bits(std::ldexp(1023.5f, -24)), 0x0400);  // carries into the first normal
  const float b = std::ldexp(1.0f, -8);                             // half of one bfloat16 ulp at 1
  EXPECT_EQ(float_to_bf16_bits(1.0f + b), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * b), 0x3F82);
  EXPECT_EQ(float_to_bf16_bits(1.0f + b + b / 64), 0x3F81);
  EXPECT_EQ(float_to_bf16_bits(-(1.0f + 3 * b)), 0xBF82);
}

TEST(InterpHalf, AllBitPatternsRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = half_bits_to_float(bits);
    ASSERT_EQ(float_to_half_bits(f), bits) << "half 0x" << std::hex << h;
    const float g = bf16_bits_to_float(bits);
    ASSERT_EQ(float_to_bf16_bits(g), bits) << "bf16 0x" << std::hex << h;
    ASSERT_EQ(bits_of(g), h << 16);  // bfloat16 is the top half of a float
    const bool half_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    ASSERT_EQ(std::isnan(f), half_nan);
  }
}

TEST(InterpHalf, RandomFloatsRoundToNearest) {
  auto g = test::rng(11);
  std::uniform_int_distribution<uint32_t> any;
  for (int k = 0; k < 200000; ++k) {
    // Floats in and around the half range (exponents -30..17), both signs.
    const float x =
        std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(g), static_cast<int>(any(g) % 48) - 30) *
        (any(g) & 1 ? -1.0f : 1.0f);
    const uint16_t h = float_to_half_bits(x);
    const double err = std::fabs(static_cast<double>(half_bits_to_float(h)) - x);
    if ((h & 0x7FFF) == 0x7C00) {  // overflow: only from at least 65520
      ASSERT_GE(std::fabs(x), 65520.0f) << x;
      continue;
    }
    ASSERT_LT(std::fabs(x), 65520.0f) << x;
    for (const int d : {-1, 1}) {  // no neighbour is closer; on a tie the result is even
      const uint16_t n = static_cast<uint16_t>(h + d);
      if ((n & 0x7FFF) > 0x7C00 || ((h & 0x7FFF) == 0 && d == -1)) continue;
      const double nerr = std::fabs(static_cast<double>(half_bits_to_float(n)) - x);
      ASSERT_LE(err, nerr) << x;
      if (err == nerr) {
        ASSERT_EQ(h & 1, 0) << x;
      }
    }
  }
}

// ---- CPU nests ---------------------------------------------------------------------------------

// docs/loop-nests.md, CPU pointwise: out = x * a + b, tiles of 16384.
TEST(InterpCpu, PointwiseNest) {
  const Expr n = v("n"), t = v("t"), j0 = v("j0"), jn = v("jn"), j = v("j");
  const Expr i = j0 + j;
  const Stmt inner = make_for("j", 0, jn, ForKind::Serial, make_store("out", i, ld("x", i) * ld("a", i) + ld("b", i)));
  const Stmt body = make_for("t", 0, (n + 16383) / 16384, ForKind::Parallel,
                             make_let("j0", t * 16384, make_let("jn", min(n - j0, make_int(16384)), inner)));
  const LoweredFunc f =
      func("pw", {buf("out", F32, true), buf("x", F32), buf("a", F32), buf("b", F32), scalar("n")}, body);

  auto g = test::rng(1);
  const size_t n_val = 65536 + g() % 20000;  // a partial last tile
  const auto x = random_floats(g, n_val, -10, 10), a = random_floats(g, n_val, -10, 10),
             b = random_floats(g, n_val, -10, 10);
  std::vector<float> out(n_val + 16, std::numeric_limits<float>::quiet_NaN());
  interpret(f, {ptr(out.data()), ptr(const_cast<float*>(x.data())), ptr(const_cast<float*>(a.data())),
                ptr(const_cast<float*>(b.data())), i64(static_cast<int64_t>(n_val))});
  for (size_t k = 0; k < n_val; ++k) {
    volatile float p = x[k] * a[k];
    const float want = p + b[k];
    ASSERT_EQ(bits_of(out[k]), bits_of(want)) << k;
  }
  for (size_t k = n_val; k < out.size(); ++k) ASSERT_TRUE(std::isnan(out[k]));
}

TEST(InterpCpu, SoftmaxNest) {
  const Expr row = v("row"), r = v("r"), j = v("j"), m = var("m", F32), s = var("s", F32);
  const Expr x_at = ld("x", row * r + j);
  // An 8-lane reduction into local `acc` of term(index), as in docs/loop-nests.md, then `rest`.
  const auto reduce = [&](const std::string& acc, Expr init, ReduceOp op, const std::function<Expr(Expr)>& term,
                          Stmt rest) {
    const Expr c = v("c"), l = v("l"), jj = v("j");
    const auto a = [&](Expr i) { return ld(acc, std::move(i)); };
    return make_allocate(
        acc, F32, 8, MemoryScope::Local,
        make_block({
            make_for("l", 0, 8, ForKind::Vectorized, make_store(acc, l, init)),
            make_for("c", 0, r / 8, ForKind::Serial,
                     make_for("l", 0, 8, ForKind::Vectorized,
                              make_store(acc, l, reduce_combine(op, a(l), term(row * r + c * 8 + l))))),
            make_for("j", r / 8 * 8, r - r / 8 * 8, ForKind::Serial,
                     make_store(acc, 0, reduce_combine(op, a(0), term(row * r + jj)))),
            make_for("l", 1, 7, ForKind::Unrolled, make_store(acc, 0, reduce_combine(op, a(0), a(l)))),
            rest,
        }));
  };
  const auto x_of = [](Expr idx) { return ld("x", std::move(idx)); };
  const auto e_of = [&](Expr idx) { return call1(Intrinsic::Exp, ld("x", std::move(idx)) - m); };
  const Stmt out_loop =
      make_for("j", 0, r, ForKind::Serial, make_store("out", row * r + j, call1(Intrinsic::Exp, x_at - m) / s));
  const Stmt sum_part = reduce("acc1", f32(0), ReduceOp::Sum, e_of, make_let("s", ld("acc1", 0), out_loop));
  const Stmt body = make_for("row", 0, v("rows"), ForKind::Parallel,
                             reduce("acc0", f32(-kInf), ReduceOp::Max, x_of, make_let("m", ld("acc0", 0), sum_part)));
  const LoweredFunc f = func("softmax", {buf("out", F32, true), buf("x", F32), scalar("rows"), scalar("r")}, body);

  auto g = test::rng(2);
  for (const int64_t rr : {int64_t{1}, int64_t{7}, int64_t{8}, static_cast<int64_t>(9 + g() % 300)}) {
    const int64_t rows = 2 + static_cast<int64_t>(g() % 4);
    const auto x = random_floats(g, static_cast<size_t>(rows * rr), -5, 5);
    std::vector<float> out(x.size(), std::numeric_limits<float>::quiet_NaN());
    interpret(f, {ptr(out.data()), ptr(const_cast<float*>(x.data())), i64(rows), i64(rr)});
    for (int64_t ro = 0; ro < rows; ++ro) {
      const float* xr = x.data() + ro * rr;
      // The same float32 operations in the same order.
      float acc[8];
      for (float& q : acc) q = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < rr / 8; ++c)
        for (int l = 0; l < 8; ++l) acc[l] = max_f(acc[l], xr[c * 8 + l]);
      for (int64_t jj = rr / 8 * 8; jj < rr; ++jj) acc[0] = max_f(acc[0], xr[jj]);
      for (int l = 1; l < 8; ++l) acc[0] = max_f(acc[0], acc[l]);
      const float mx = acc[0];
      for (float& q : acc) q = 0;
      for (int64_t c = 0; c < rr / 8; ++c)
        for (int l = 0; l < 8; ++l) acc[l] = acc[l] + exp_f(xr[c * 8 + l] - mx);
      for (int64_t jj = rr / 8 * 8; jj < rr; ++jj) acc[0] = acc[0] + exp_f(xr[jj] - mx);
      for (int l = 1; l < 8; ++l) acc[0] = acc[0] + acc[l];
      const float sum = acc[0];
      // And a float64 softmax with a tolerance.
      double dmax = -kInf, dsum = 0;
      for (int64_t jj = 0; jj < rr; ++jj) dmax = std::max(dmax, static_cast<double>(xr[jj]));
      for (int64_t jj = 0; jj < rr; ++jj) dsum += std::exp(xr[jj] - dmax);
      for (int64_t jj = 0; jj < rr; ++jj) {
        const float got = out[static_cast<size_t>(ro * rr + jj)];
        ASSERT_EQ(bits_of(got), bits_of(exp_f(xr[jj] - mx) / sum)) << "row " << ro << " j " << jj << " r " << rr;
        const double want = std::exp(xr[jj] - dmax) / dsum;
        ASSERT_NEAR(got, want, 1e-5 * want + 1e-7);
      }
    }
  }
}

TEST(InterpCpu, Float64MathGivesTheDoubleResult) {
  // acc = 0; for i: acc = acc + x[i]; out[0] = acc, with a float32 local accumulator.
  const Expr i = v("i");
  const Stmt body = make_allocate(
      "acc", F32, 1, MemoryScope::Local,
      make_block({make_store("acc", 0, f32(0)),
                  make_for("i", 0, v("n"), ForKind::Serial, make_store("acc", 0, ld("acc", 0) + ld("x", i))),
                  make_store("out", 0, ld("acc", 0) * f32(3))}));
  const LoweredFunc f = func("sum", {buf("out", F32, true), buf("x", F32), scalar("n")}, body);
  auto g = test::rng(3);
  // Terms below half an ulp of 1000: the float32 sum stays 1000, the double sum does not.
  auto x = random_floats(g, 1000, 1e-6f, 2.5e-5f);
  x[0] = 1000.0f;
  float out32 = 0, out64 = 0;
  interpret(f, {ptr(&out32), ptr(x.data()), i64(1000)});
  interpret(f, {ptr(&out64), ptr(x.data()), i64(1000)}, InterpOptions{true});
  float s32 = 0;
  double s64 = 0;
  for (const float q : x) {
    s32 = s32 + q;
    s64 += static_cast<double>(q);
  }
  EXPECT_EQ(bits_of(out32), bits_of(s32 * 3.0f));
  EXPECT_EQ(bits_of(out64), bits_of(static_cast<float>(s64 * 3.0)));
  EXPECT_EQ(out32, 3000.0f);
  EXPECT_GT(out64, 3000.0f);
}

TEST(InterpCpu, HalfBf16BoolStorage) {
  // y = half(float(x) * 3); z = bf16(float(x) * 3); w = float(x) > 0, over all 65536 half inputs.
  const Expr i = v("i");
  const Expr xf = cast(F32, ld("x", i, DType::Float16)) * f32(3);
  const Stmt body =
      make_for("i", 0, v("n"), ForKind::Serial,
               make_block({make_store("y", i, cast(DType::Float16, xf)), make_store("z", i, cast(DType::BFloat16, xf)),
                           make_store("w", i, cast(F32, ld("x", i, DType::Float16)) > f32(0))}));
  const LoweredFunc f = func("h",
                             {buf("y", DType::Float16, true), buf("z", DType::BFloat16, true),
                              buf("w", DType::Bool, true), buf("x", DType::Float16), scalar("n")},
                             body);
  std::vector<uint16_t> x(65536), y(65536), z(65536);
  std::vector<uint8_t> w(65536, 7);
  for (uint32_t k = 0; k < 65536; ++k) x[k] = static_cast<uint16_t>(k);
  interpret(f, {ptr(y.data()), ptr(z.data()), ptr(w.data()), ptr(x.data()), i64(65536)});
  for (uint32_t k = 0; k < 65536; ++k) {
    const float xv = half_bits_to_float(x[k]);
    const float p = xv * 3.0f;
    if (std::isnan(p)) {
      ASSERT_TRUE(std::isnan(half_bits_to_float(y[k])));
      ASSERT_TRUE(std::isnan(bf16_bits_to_float(z[k])));
    } else {
      ASSERT_EQ(y[k], float_to_half_bits(p)) << k;
      ASSERT_EQ(z[k], float_to_bf16_bits(p)) << k;
    }
    ASSERT_EQ(w[k], xv > 0 ? 1 : 0) << k;
  }
}

TEST(InterpCpu, ErrorsThrowInsteadOfCrashing) {
  const Stmt oob = make_allocate("t", F32, 4, MemoryScope::Local,
                                 make_for("i", 0, 5, ForKind::Serial, make_store("t", v("i"), f32(1))));
  EXPECT_THROW(interpret(func("oob", {}, oob), {}), std::runtime_error);
  const Stmt div0 = make_store("out", 0, cast(F32, make_int(1) / v("n")));
  float out = 0;
  const LoweredFunc fd = func("div0", {buf("out", F32, true), scalar("n")}, div0);
  EXPECT_THROW(interpret(fd, {ptr(&out), i64(0)}), std::runtime_error);
  interpret(fd, {ptr(&out), i64(1)});
  EXPECT_EQ(out, 1.0f);
  EXPECT_THROW(interpret(fd, {ptr(&out)}), std::runtime_error);                                   // argument count
  EXPECT_THROW(interpret(func("ub", {}, make_store("out", 0, f32(1))), {}), std::runtime_error);  // unknown buffer
  EXPECT_THROW(interpret(func("uv", {buf("out", F32)}, make_store("out", 0, var("q", F32))), {ptr(&out)}),
               std::runtime_error);  // unbound var
  EXPECT_THROW(interpret(func("ty", {buf("out", F32)}, make_store("out", 0, f64(1))), {ptr(&out)}),
               std::runtime_error);  // stored type differs from the buffer's
  EXPECT_THROW(interpret(func("bar", {}, make_barrier()), {}), std::runtime_error);  // no thread loop
}

// ---- GPU nests ---------------------------------------------------------------------------------

Stmt gpu_block_loop(const std::string& name, Expr extent, Stmt body, int axis = 0) {
  return make_for(name, 0, std::move(extent), ForKind::GPUBlock, std::move(body), axis);
}
Stmt gpu_thread_loop(const std::string& name, Expr extent, Stmt body, int axis = 0) {
  return make_for(name, 0, std::move(extent), ForKind::GPUThread, std::move(body), axis);
}

// docs/loop-nests.md, GPU pointwise with a tail: out = x * x + 1.
TEST(InterpGpu, PointwiseWithTailWritesExactlyN) {
  const Expr n = v("n"), bx = v("bx"), tx = v("tx"), base = v("base"), vv = v("v");
  const auto fx = [](Expr i) { return ld("x", i) * ld("x", i) + f32(1); };
  const Stmt vec = make_for("v", 0, 4, ForKind::Vectorized, make_store("out", base + vv, fx(base + vv)));
  const Stmt tail =
      make_for("v", 0, 4, ForKind::Unrolled, make_if(base + vv < n, make_store("out", base + vv, fx(base + vv))));
  const Stmt body = gpu_block_loop(
      "bx", (n + 1023) / 1024,
      gpu_thread_loop("tx", 256, make_let("base", (bx * 256 + tx) * 4, make_if(base + 4 <= n, vec, tail))));
  LoweredFunc f = func("pw", {buf("out", F32, true), buf("x", F32), scalar("n")}, body, Target::CUDA);
  f.grid[0] = (n + 1023) / 1024;
  f.block[0] = make_int(256);

  auto g = test::rng(4);
  for (const int64_t n_val : {int64_t{1}, int64_t{1023}, int64_t{1026}, static_cast<int64_t>(65536 + 1 + g() % 1021)}) {
    const auto x = random_floats(g, static_cast<size_t>(n_val), -100, 100);
    std::vector<float> out(static_cast<size_t>(n_val) + 3000, std::numeric_limits<float>::quiet_NaN());
    const uint32_t poison = bits_of(out[0]);
    interpret(f, {ptr(out.data()), ptr(const_cast<float*>(x.data())), i64(n_val)});
    for (int64_t k = 0; k < n_val; ++k) {
      volatile float p = x[static_cast<size_t>(k)] * x[static_cast<size_t>(k)];
      ASSERT_EQ(bits_of(out[static_cast<size_t>(k)]), bits_of(p + 1.0f)) << k;
    }
    for (size_t k = static_cast<size_t>(n_val); k < out.size(); ++k) ASSERT_EQ(bits_of(out[k]), poison) << k;
  }
  // The launch shape is checked against the loops.
  f.block[0] = make_int(128);
  std::vector<float> out(8), x(8);
  EXPECT_THROW(interpret(f, {ptr(out.data()), ptr(x.data()), i64(8)}), std::runtime_error);
}

// docs/loop-nests.md, GPU softmax with one block of 256 threads per row and BlockReduce.
LoweredFunc gpu_softmax() {
  const Expr row = v("row"), r = v("r"), tx = v("tx"), c = v("c"), j = v("j");
  const Expr m = var("m", F32), s = var("s", F32), x_at = ld("x", row * r + j);
  const auto strided = [&](Stmt body) {
    return make_for("c", 0, (r + 255) / 256, ForKind::Serial, make_let("j", c * 256 + tx, make_if(j < r, body)));
  };
  const Stmt out_loop = strided(make_store("out", row * r + j, call1(Intrinsic::Exp, x_at - m) / s));
  const Stmt sum_part = make_allocate(
      "acc1", F32, 1, MemoryScope::Local,
      make_block({make_store("acc1", 0, f32(0)),
                  strided(make_store("acc1", 0, ld("acc1", 0) + call1(Intrinsic::Exp, x_at - m))),
                  make_block_reduce(ReduceOp::Sum, "acc1", F32), make_let("s", ld("acc1", 0), out_loop)}));
  const Stmt max_part = make_allocate(
      "acc0", F32, 1, MemoryScope::Local,
      make_block({make_store("acc0", 0, f32(-kInf)),
                  strided(make_store("acc0", 0, reduce_combine(ReduceOp::Max, ld("acc0", 0), x_at))),
                  make_block_reduce(ReduceOp::Max, "acc0", F32), make_let("m", ld("acc0", 0), sum_part)}));
  LoweredFunc f = func("softmax", {buf("out", F32, true), buf("x", F32), scalar("rows"), scalar("r")},
                       gpu_block_loop("row", v("rows"), gpu_thread_loop("tx", 256, max_part)), Target::CUDA);
  f.grid[0] = v("rows");
  f.block[0] = make_int(256);
  return f;
}

TEST(InterpGpu, SoftmaxOneBlockPerRowWithBlockReduce) {
  const LoweredFunc f = gpu_softmax();
  auto g = test::rng(5);
  for (const int64_t rr : {int64_t{1}, int64_t{255}, int64_t{256}, static_cast<int64_t>(257 + g() % 1500)}) {
    const int64_t rows = 1 + static_cast<int64_t>(g() % 3);
    auto x = random_floats(g, static_cast<size_t>(rows * rr), -8, 8);
    std::vector<float> out(x.size(), std::numeric_limits<float>::quiet_NaN());
    interpret(f, {ptr(out.data()), ptr(x.data()), i64(rows), i64(rr)});
    for (int64_t ro = 0; ro < rows; ++ro) {
      const float* xr = x.data() + ro * rr;
      // Per thread: a strided partial; then the block combines in thread order.
      std::vector<float> part(256, -std::numeric_limits<float>::infinity());
      for (int64_t jj = 0; jj < rr; ++jj) part[jj % 256] = max_f(part[jj % 256], xr[jj]);
      float mx = part[0];
      for (int t = 1; t < 256; ++t) mx = std::max(mx, part[t]);
      std::fill(part.begin(), part.end(), 0.0f);
      for (int64_t jj = 0; jj < rr; ++jj) part[jj % 256] = part[jj % 256] + exp_f(xr[jj] - mx);
      float sum = part[0];
      for (int t = 1; t < 256; ++t) sum = sum + part[t];
      double dmax = -kInf, dsum = 0;
      for (int64_t jj = 0; jj < rr; ++jj) dmax = std::max(dmax, static_cast<double>(xr[jj]));
      for (int64_t jj = 0; jj < rr; ++jj) dsum += std::exp(xr[jj] - dmax);
      for (int64_t jj = 0; jj < rr; ++jj) {
        const float got = out[static_cast<size_t>(ro * rr + jj)];
        ASSERT_EQ(bits_of(got), bits_of(exp_f(xr[jj] - mx) / sum)) << "row " << ro << " j " << jj << " r " << rr;
        const double want = std::exp(xr[jj] - dmax) / dsum;
        ASSERT_NEAR(got, want, 1e-5 * want + 1e-7);
      }
    }
  }
  // A NaN anywhere in a row makes that row's max, and so the whole row, NaN.
  std::vector<float> x(600, 1.0f), out(600, 0.0f);
  x[300 + 77] = std::numeric_limits<float>::quiet_NaN();
  interpret(f, {ptr(out.data()), ptr(x.data()), i64(2), i64(300)});
  EXPECT_FLOAT_EQ(out[0], 1.0f / 300);
  EXPECT_TRUE(std::isnan(out[300]));
  EXPECT_TRUE(std::isnan(out[599]));
}

// A tree reduction in shared memory with barriers: out[b] = sum of x[b*256 .. b*256+256) (x padded
// with 0 beyond n), the stride read from an int64 table inside a uniform serial loop.
TEST(InterpGpu, SharedMemoryTreeReductionWithBarriers) {
  const Expr b = v("b"), tx = v("tx"), i = v("i"), k = v("k"), s = v("s"), n = v("n");
  const Stmt step = make_let(
      "s", ld("strides", k, I64),
      make_block({make_if(tx < s, make_store("sdata", tx, ld("sdata", tx) + ld("sdata", tx + s))), make_barrier()}));
  const Stmt body =
      make_allocate("sdata", F32, 256, MemoryScope::Shared,
                    make_block({make_let("i", b * 256 + tx, make_store("sdata", tx, select(i < n, ld("x", i), f32(0)))),
                                make_barrier(), make_for("k", 0, 8, ForKind::Serial, step),
                                make_if(tx == 0, make_store("out", b, ld("sdata", 0)))}));
  LoweredFunc f = func("tree", {buf("out", F32, true), buf("x", F32), buf("strides", I64), scalar("n")},
                       gpu_block_loop("b", (n + 255) / 256, gpu_thread_loop("tx", 256, body)), Target::CUDA);
  f.block[0] = make_int(256);
  const std::vector<int64_t> strides{128, 64, 32, 16, 8, 4, 2, 1};
  auto g = test::rng(6);
  const int64_t n_val = 256 * 5 + 1 + static_cast<int64_t>(g() % 254);
  const auto x = random_floats(g, static_cast<size_t>(n_val), -1, 1);
  const int64_t blocks = (n_val + 255) / 256;
  std::vector<float> out(static_cast<size_t>(blocks), std::numeric_limits<float>::quiet_NaN());
  interpret(
      f, {ptr(out.data()), ptr(const_cast<float*>(x.data())), ptr(const_cast<int64_t*>(strides.data())), i64(n_val)});
  for (int64_t bb = 0; bb < blocks; ++bb) {
    float sd[256];
    for (int t = 0; t < 256; ++t) sd[t] = bb * 256 + t < n_val ? x[static_cast<size_t>(bb * 256 + t)] : 0.0f;
    for (int st = 128; st >= 1; st /= 2)
      for (int t = 0; t < st; ++t) sd[t] = sd[t] + sd[t + st];
    ASSERT_EQ(bits_of(out[static_cast<size_t>(bb)]), bits_of(sd[0])) << "block " << bb;
  }
}

TEST(InterpGpu, NestedThreadLoopsAndBlockReduceSum) {
  // A 32 x 4 block: out[ty * 32 + tx] = linear id; total[0] = block_reduce sum of the ids.
  const Expr tx = v("tx"), ty = v("ty");
  const Stmt body = make_allocate(
      "acc", I64, 1, MemoryScope::Local,
      make_block({make_store("acc", 0, ty * 32 + tx), make_store("out", ty * 32 + tx, ld("acc", 0, I64) * 10),
                  make_block_reduce(ReduceOp::Sum, "acc", I64),
                  make_if(tx + ty == 0, make_store("total", 0, ld("acc", 0, I64)))}));
  LoweredFunc f =
      func("ids", {buf("out", I64, true), buf("total", I64, true)},
           gpu_block_loop("bx", 1, gpu_thread_loop("ty", 4, gpu_thread_loop("tx", 32, body, 0), 1)), Target::CUDA);
  f.block[0] = make_int(32);
  f.block[1] = make_int(4);
  std::vector<int64_t> out(128, -1), total(1, -1);
  interpret(f, {ptr(out.data()), ptr(total.data())});
  for (int64_t k = 0; k < 128; ++k) ASSERT_EQ(out[static_cast<size_t>(k)], k * 10);
  EXPECT_EQ(total[0], 127 * 128 / 2);
}

TEST(InterpGpu, CollectivesUnderDivergentControlFlowThrow) {
  const Expr tx = v("tx");
  const auto kernel = [&](Stmt inner) {
    const Stmt body = make_allocate("acc", F32, 1, MemoryScope::Local,
                                    make_block({make_store("acc", 0, f32(1)), std::move(inner),
                                                make_if(tx == 0, make_store("out", 0, ld("acc", 0)))}));
    return func("k", {buf("out", F32, true)}, gpu_block_loop("bx", 1, gpu_thread_loop("tx", 64, body)), Target::CUDA);
  };
  float out = 0;
  // Uniform condition: every thread reaches the collective.
  interpret(kernel(make_if(tx < 64, make_block_reduce(ReduceOp::Sum, "acc", F32))), {ptr(&out)});
  EXPECT_EQ(out, 64.0f);
  // Divergent If.
  try {
    interpret(kernel(make_if(tx < 32, make_block_reduce(ReduceOp::Sum, "acc", F32))), {ptr(&out)});
    FAIL() << "expected a throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("collective under divergent control flow"), std::string::npos) << e.what();
  }
  // In the else branch, too.
  EXPECT_THROW(interpret(kernel(make_if(tx < 32, make_barrier(), make_barrier())), {ptr(&out)}), std::runtime_error);
  // A loop whose trip count differs between threads.
  EXPECT_THROW(interpret(kernel(make_for("c", 0, tx % 2 + 1, ForKind::Serial, make_barrier())), {ptr(&out)}),
               std::runtime_error);
  // A loop with a uniform trip count is fine.
  interpret(kernel(make_for("c", 0, 3, ForKind::Serial, make_barrier())), {ptr(&out)});
  EXPECT_EQ(out, 1.0f);
}

TEST(InterpGpu, DivergentLoopRunsPerThreadTripCounts) {
  // Thread t adds 1 to its accumulator t times; shared memory is one per block.
  const Expr tx = v("tx"), bx = v("bx");
  const Stmt body = make_allocate(
      "acc", I32, 1, MemoryScope::Local,
      make_allocate("sh", I32, 16, MemoryScope::Shared,
                    make_block({make_store("acc", 0, i32(0)),
                                make_for("c", 0, tx, ForKind::Serial, make_store("acc", 0, ld("acc", 0, I32) + i32(1))),
                                make_store("sh", 15 - tx, ld("acc", 0, I32)), make_barrier(),
                                make_store("out", bx * 16 + tx, ld("sh", tx, I32) + cast(I32, bx) * i32(100))})));
  const LoweredFunc f =
      func("d", {buf("out", I32, true)}, gpu_block_loop("bx", 2, gpu_thread_loop("tx", 16, body)), Target::CUDA);
  std::vector<int32_t> out(32, -1);
  interpret(f, {ptr(out.data())});
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 16; ++t) ASSERT_EQ(out[static_cast<size_t>(b * 16 + t)], 15 - t + 100 * b);
}

}  // namespace
}  // namespace flow::dsl

// Note: tests of the LLVM CPU backend (jit/llvm). Kernels are built by hand with the dsl builders,
// compiled to an object, loaded through CpuKernelLoader and run; results are compared with the
// reference interpreter (bit for bit where the backend promises it: arithmetic, casts, min/max,
// integer div/mod) or with <cmath> in double under the documented error bounds (float32 exp/log/
// tanh/erf are inline polynomials). Without LLVM (FLOW_HAS_LLVM undefined) the backend is not built
// and this file holds one test that the header still compiles standalone.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "jit/llvm/llvm_codegen.h"

#ifndef FLOW_HAS_LLVM

TEST(LlvmBackend, NotBuiltWithoutLlvm) {
  flow::jit::llvm_backend::CpuCompileOptions opt;
  EXPECT_EQ(opt.opt_level, 3);
}

#else

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dsl/interpreter.h"
#include "dsl/simplify.h"
#include "jit/llvm/lane_form.h"
#include "test_util.h"

namespace flow::jit::llvm_backend {
namespace {

using dsl::ArgValue;
using dsl::DType;
using dsl::Expr;
using dsl::ForKind;
using dsl::Intrinsic;
using dsl::LoweredFunc;
using dsl::Stmt;

constexpr DType kBool = DType::Bool;
constexpr DType I32 = DType::Int32;
constexpr DType I64 = DType::Int64;
constexpr DType F16 = DType::Float16;
constexpr DType BF16 = DType::BFloat16;
constexpr DType F32 = DType::Float32;
constexpr DType F64 = DType::Float64;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- kernel arguments with their own storage ---------------------------------------------------

struct Arg {
  bool is_buffer = false;
  DType dtype = I64;
  std::vector<uint8_t> bytes;
  ArgValue scalar{};
  size_t size() const { return bytes.size() / static_cast<size_t>(dsl::dtype_size(dtype)); }
  template <class T>
  T at(size_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
};

template <class T>
Arg buffer_of(DType t, const std::vector<T>& v) {
  Arg a;
  a.is_buffer = true;
  a.dtype = t;
  a.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}
Arg zeros(DType t, size_t n) {
  Arg a;
  a.is_buffer = true;
  a.dtype = t;
  a.bytes.assign(n * static_cast<size_t>(dsl::dtype_size(t)), 0);
  return a;
}
Arg int_arg(int64_t v) {
  Arg a;
  a.scalar.i64 = v;
  return a;
}
Arg float_arg(double v, DType t) {
  Arg a;
  a.dtype = t;
  a.scalar.f64 = v;
  return a;
}
std::vector<ArgValue> abi(std::vector<Arg>& args) {
  std::vector<ArgValue> out;
  for (Arg& a : args) {
    if (a.is_buffer) {
      ArgValue v;
      v.ptr = a.bytes.data();
      out.push_back(v);
    } else {
      out.push_back(a.scalar);
    }
  }
  return out;
}

dsl::Param buf(const std::string& name, DType t, bool out = false) {
  return dsl::Param{name, dsl::ParamKind::Buffer, t, out};
}
dsl::Param scalar(const std::string& name, DType t = I64) {
  return dsl::Param{name, dsl::ParamKind::Scalar, t, false};
}

CpuKernelFn jit(const LoweredFunc& f) {
  CpuKernelLoader loader;
  return loader.load(compile_to_object(f), f.name);
}
void run_jit(const LoweredFunc& f, std::vector<Arg>& args) {
  std::vector<ArgValue> v = abi(args);
  jit(f)(v.data());
}

// Runs `f` compiled and interpreted on copies of `args`: {jit, interpreter}.
std::pair<std::vector<Arg>, std::vector<Arg> > run_both(const LoweredFunc& f, const std::vector<Arg>& args) {
  std::vector<Arg> a = args, b = args;
  run_jit(f, a);
  std::vector<ArgValue> vb = abi(b);
  dsl::interpret(f, vb);
  return {a, b};
}

// Element i of a buffer as a double (halves decoded); integers exactly representable here.
double value_at(const Arg& a, size_t i) {
  switch (a.dtype) {
    case kBool:
      return a.at<uint8_t>(i);
    case I32:
      return a.at<int32_t>(i);
    case I64:
      return static_cast<double>(a.at<int64_t>(i));
    case F16:
      return dsl::half_bits_to_float(a.at<uint16_t>(i));
    case BF16:
      return dsl::bf16_bits_to_float(a.at<uint16_t>(i));
    case F32:
      return a.at<float>(i);
    case F64:
      return a.at<double>(i);
    case DType::UInt8:
      return a.at<uint8_t>(i);
    case DType::Int8:
      return a.at<int8_t>(i);
    case DType::Int16:
      return a.at<int16_t>(i);
  }
  return 0;
}

// Bit-exact comparison, except that any two NaNs match.
void expect_same(const Arg& got, const Arg& want, const std::string& what,
                 const std::function<std::string(size_t)>& input = {}) {
  ASSERT_EQ(got.bytes.size(), want.bytes.size());
  const size_t w = static_cast<size_t>(dsl::dtype_size(got.dtype));
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 10; ++i) {
    if (std::memcmp(got.bytes.data() + i * w, want.bytes.data() + i * w, w) == 0) continue;
    if (dsl::is_floating(got.dtype) && std::isnan(value_at(got, i)) && std::isnan(value_at(want, i))) continue;
    ++failures;
    ADD_FAILURE() << what << " [" << i << "]" << (input ? " input " + input(i) : "") << ": jit " << value_at(got, i)
                  << " interpreter " << value_at(want, i);
  }
}

// Distance in units of the last place of `ref` rounded to float32 (subnormal ulp below 2^-126).
double ulps_f32(float got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : 1e30;
  const float rf = static_cast<float>(ref);
  if (std::isinf(rf) || std::isinf(got)) return got == rf ? 0 : 1e30;
  const int e = rf == 0 ? -126 : std::max(std::ilogb(rf), -126);
  return std::fabs(static_cast<double>(got) - ref) / std::ldexp(1.0, e - 23);
}
double ulps_f64(double got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : 1e30;
  if (std::isinf(ref) || std::isinf(got)) return got == ref ? 0 : 1e30;
  const int e = ref == 0 ? -1022 : std::max(std::ilogb(ref), -1022);
  return std::fabs(got - ref) / std::ldexp(1.0, e - 52);
}

Expr v64(const std::string& name) {
  return dsl::var(name, I64);
}
Expr ld(DType t, const std::string& b, Expr i) {
  return dsl::load(t, b, std::move(i));
}
Expr call1(Intrinsic f, Expr a) {
  return dsl::call(f, {std::move(a)});
}
Expr f32c(double v) {
  return dsl::make_float(v, F32);
}

// out[i] = body(i) for i in [0, n): a plain parallel loop over elements.
LoweredFunc elementwise(const std::string& name, std::vector<dsl::Param> params, const std::string& out,
                        const std::function<Expr(Expr)>& body) {
  LoweredFunc f;
  f.name = name;
  f.params = std::move(params);
  f.params.push_back(scalar("n"));
  f.body = dsl::make_for("i", 0, v64("n"), ForKind::Parallel, dsl::make_store(out, v64("i"), body(v64("i"))));
  return f;
}

// The CPU pointwise nest of docs/loop-nests.md: tiles of 16384 over the thread pool, a serial
// (vectorizable) inner loop.
LoweredFunc pointwise(const std::string& name, const std::function<Expr(Expr, Expr, Expr)>& fn) {
  LoweredFunc f;
  f.name = name;
  f.params = {buf("out", F32, true), buf("x", F32), buf("a", F32), buf("b", F32), scalar("n")};
  const Expr n = v64("n"), t = v64("t"), j = v64("j"), j0 = v64("j0"), jn = v64("jn");
  const Expr idx = j0 + j;
  Stmt inner = dsl::make_for("j", 0, jn, ForKind::Serial,
                             dsl::make_store("out", idx, fn(ld(F32, "x", idx), ld(F32, "a", idx), ld(F32, "b", idx))));
  f.body = dsl::make_for("t", 0, (n + 16383) / 16384, ForKind::Parallel,
                         dsl::make_let("j0", t * 16384, dsl::make_let("jn", dsl::min(n - j0, Expr(16384)), inner)));
  return f;
}

// The six-op chain of the benchmark: ((sigmoid(x * a + b) * x) - a) * b.
Expr six_op_chain(Expr x, Expr a, Expr b) {
  Expr s = f32c(1.0) / (f32c(1.0) + call1(Intrinsic::Exp, -(x * a + b)));
  return (s * x - a) * b;
}

// The CPU softmax nest of docs/loop-nests.md (rows x r, 8 explicit lanes).
LoweredFunc softmax() {
  LoweredFunc f;
  f.name = "softmax";
  f.params = {buf("out", F32, true), buf("x", F32), scalar("rows"), scalar("r")};
  const Expr row = v64("row"), r = v64("r"), c = v64("c"), l = v64("l"), j = v64("j");
  auto x_at = [&](Expr i) { return ld(F32, "x", row * r + i); };
  auto acc = [&](const std::string& b, Expr i) { return ld(F32, b, std::move(i)); };
  auto reduce = [&](const std::string& b, dsl::ReduceOp op, const std::function<Expr(Expr)>& term) {
    return dsl::make_block({
        dsl::make_for("l", 0, 8, ForKind::Vectorized, dsl::make_store(b, l, dsl::reduce_identity(op, F32))),
        dsl::make_for("c", 0, r / 8, ForKind::Serial,
                      dsl::make_for("l", 0, 8, ForKind::Vectorized,
                                    dsl::make_store(b, l, dsl::reduce_combine(op, acc(b, l), term(c * 8 + l))))),
        dsl::make_for("j", r / 8 * 8, r - r / 8 * 8, ForKind::Serial,
                      dsl::make_store(b, 0, dsl::reduce_combine(op, acc(b, 0), term(j)))),
        dsl::make_for("l", 1, 7, ForKind::Unrolled,
                      dsl::make_store(b, 0, dsl::reduce_combine(op, acc(b, 0), acc(b, l)))),
    });
  };
  const Expr m = dsl::var("m", F32), s = dsl::var("s", F32);
  Stmt normalize = dsl::make_for("j", 0, r, ForKind::Serial,
                                 dsl::make_store("out", row * r + j, call1(Intrinsic::Exp, x_at(j) - m) / s));
  Stmt sum = dsl::make_allocate(
      "acc1", F32, 8, dsl::MemoryScope::Local,
      dsl::make_block({reduce("acc1", dsl::ReduceOp::Sum, [&](Expr i) { return call1(Intrinsic::Exp, x_at(i) - m); }),
                       dsl::make_let("s", acc("acc1", 0), normalize)}));
  Stmt body = dsl::make_allocate(
      "acc0", F32, 8, dsl::MemoryScope::Local,
      dsl::make_block({reduce("acc0", dsl::ReduceOp::Max, x_at), dsl::make_let("m", acc("acc0", 0), sum)}));
  f.body = dsl::make_for("row", 0, v64("rows"), ForKind::Parallel, body);
  return f;
}

std::vector<float> random_floats(std::mt19937_64& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// ---- tests ---------------------------------------------------------------------------------------

TEST(LlvmBackend, CompilerIdNamesLlvmVersionCpuAndFeatures) {
  EXPECT_TRUE(llvm_backend_available());
  const std::string id = llvm_compiler_id();
  EXPECT_EQ(id.rfind("llvm-14.", 0), 0u) << id;
  EXPECT_EQ(std::count(id.begin(), id.end(), '/'), 2) << id;
  EXPECT_EQ(id, llvm_compiler_id());
  CpuCompileOptions a, b;
  b.noalias_buffers = false;
  EXPECT_NE(a.key(), b.key());
}

TEST(LlvmBackend, TextualIrHasTheAbiEntryPoint) {
  const std::string ir = emit_llvm_ir(pointwise("pw_ir", six_op_chain));
  EXPECT_NE(ir.find("define void @pw_ir(i8* %args)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@flow_parallel_for"), std::string::npos);
  EXPECT_NE(ir.find("noalias"), std::string::npos);
}

TEST(LlvmBackend, Float32ExpChainVectorizes) {
  const std::string ir = optimized_llvm_ir(pointwise("pw_vec", six_op_chain));
  const bool vec = ir.find("<16 x float>") != std::string::npos || ir.find("<8 x float>") != std::string::npos ||
                   ir.find("<4 x float>") != std::string::npos;
  EXPECT_TRUE(vec) << ir;
  // exp is inline: no libm call left.
  EXPECT_EQ(ir.find("@expf"), std::string::npos);
  EXPECT_EQ(ir.find("@llvm.exp."), std::string::npos);
  // Every float32 transcendental vectorizes too.
  for (Intrinsic fn : {Intrinsic::Log, Intrinsic::Tanh, Intrinsic::Erf}) {
    const std::string t = optimized_llvm_ir(pointwise("pw_fn", [&](Expr x, Expr, Expr) { return call1(fn, x); }));
    EXPECT_TRUE(t.find("x float>") != std::string::npos) << dsl::intrinsic_name(fn) << "\n" << t;
  }
}

TEST(LlvmBackend, SixOpChainMatchesInterpreter) {
  auto g = test::rng(1);
  const LoweredFunc f = pointwise("pw_chain", six_op_chain);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{16384}, int64_t{3 * 16384 + 5}}) {
    const size_t un = static_cast<size_t>(n);
    std::vector<Arg> args = {zeros(F32, un), buffer_of(F32, random_floats(g, un, -4, 4)),
                             buffer_of(F32, random_floats(g, un, -4, 4)), buffer_of(F32, random_floats(g, un, -4, 4)),
                             int_arg(n)};
    auto [got, want] = run_both(f, args);
    for (size_t i = 0; i < un; ++i) {
      const double w = want[0].at<float>(i), v = got[0].at<float>(i);
      ASSERT_NEAR(v, w, 2e-5 * (1 + std::fabs(w))) << "n=" << n << " i=" << i;
    }
  }
}

TEST(LlvmBackend, EveryOptLevelGivesTheSameResults) {
  auto g = test::rng(11);
  const LoweredFunc f = pointwise("pw_levels", six_op_chain);
  const size_t n = 1000;
  std::vector<Arg> args = {zeros(F32, n), buffer_of(F32, random_floats(g, n, -4, 4)),
                           buffer_of(F32, random_floats(g, n, -4, 4)), buffer_of(F32, random_floats(g, n, -4, 4)),
                           int_arg(static_cast<int64_t>(n))};
  std::vector<std::vector<Arg> > results;
  for (int level = 0; level <= 3; ++level) {
    CpuCompileOptions opt;
    opt.opt_level = level;
    std::vector<Arg> a = args;
    std::vector<ArgValue> v = abi(a);
    CpuKernelLoader().load(compile_to_object(f, opt), f.name)(v.data());
    results.push_back(a);
  }
  // Only FMA contraction of the polynomials (llvm.fmuladd) may differ between levels.
  for (size_t i = 0; i < n; ++i) {
    for (int level = 0; level < 3; ++level) {
      ASSERT_NEAR(results[static_cast<size_t>(level)][0].at<float>(i), results[3][0].at<float>(i), 1e-5) << i;
    }
  }
  CpuCompileOptions bad;
  bad.opt_level = 4;
  EXPECT_THROW(compile_to_object(f, bad), std::runtime_error);
}

TEST(LlvmBackend, PointwiseArithmeticIsBitExact) {
  auto g = test::rng(2);
  const LoweredFunc f = pointwise("pw_exact", [](Expr x, Expr a, Expr b) {
    return dsl::max(x * a - b, x / (a + f32c(0.5))) + dsl::min(x, b) * call1(Intrinsic::Sqrt, call1(Intrinsic::Abs, a));
  });
  const size_t n = 40000;
  std::vector<float> x = random_floats(g, n, -100, 100);
  x[0] = static_cast<float>(kNaN);
  x[1] = -0.0f;
  x[2] = static_cast<float>(kInf);
  std::vector<Arg> args = {zeros(F32, n), buffer_of(F32, x), buffer_of(F32, random_floats(g, n, -2, 2)),
                           buffer_of(F32, random_floats(g, n, -100, 100)), int_arg(static_cast<int64_t>(n))};
  auto [got, want] = run_both(f, args);
  expect_same(got[0], want[0], "pw_exact");
}

TEST(LlvmBackend, SoftmaxNestMatchesInterpreterAndVectorizes) {
  auto g = test::rng(3);
  const LoweredFunc f = softmax();
  const std::string ir = optimized_llvm_ir(f);
  // The explicit 8-lane accumulators stay in vector registers across the reduction loop.
  EXPECT_NE(ir.find("phi <8 x float>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("load <8 x float>"), std::string::npos) << ir;
  for (auto [rows, r] : std::vector<std::pair<int64_t, int64_t> >{{1, 1}, {3, 7}, {2, 8}, {5, 37}, {9, 1000}}) {
    const size_t total = static_cast<size_t>(rows * r);
    std::vector<float> x = random_floats(g, total, -20, 20);
    std::vector<Arg> args = {zeros(F32, total), buffer_of(F32, x), int_arg(rows), int_arg(r)};
    auto [got, want] = run_both(f, args);
    for (size_t i = 0; i < total; ++i) {
      const double w = want[0].at<float>(i), v = got[0].at<float>(i);
      ASSERT_NEAR(v, w, 1e-5 * std::fabs(w) + 1e-30) << "rows=" << rows << " r=" << r << " i=" << i;
    }
  }
  // A NaN in a row makes that row NaN (the max propagates it), and only that row.
  std::vector<float> x(16, 1.0f);
  x[3] = static_cast<float>(kNaN);
  std::vector<Arg> args = {zeros(F32, 16), buffer_of(F32, x), int_arg(2), int_arg(8)};
  run_jit(f, args);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(std::isnan(args[0].at<float>(i)), i < 8) << i;
}

// Values of `t` that exercise casts: extremes, rounding boundaries and random ones, as bytes.
std::vector<uint8_t> cast_inputs(DType t, std::mt19937_64& g) {
  std::vector<uint8_t> out;
  auto push = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  std::vector<double> floats = {0.0,
                                -0.0,
                                1.0,
                                -1.0,
                                0.5,
                                1.5,
                                2.5,
                                -2.5,
                                65504,
                                65519.99,
                                65520,
                                -65520,
                                1e-8,
                                6e-8,
                                5.96e-8,
                                2.98e-8,
                                1e-40,
                                -1e-45,
                                3.4e38,
                                1e39,
                                1e300,
                                -1e300,
                                4.9e-324,
                                kInf,
                                -kInf,
                                kNaN,
                                -kNaN,
                                2147483647.0,
                                2147483648.0,
                                -2147483648.0,
                                -2147483649.0,
                                9.2233720368547758e18,
                                -9.2233720368547758e18,
                                1e19,
                                16777217.0,
                                3.3895e38,
                                3.3896e38,
                                1.0000001,
                                0.33333334,
                                255.9,  // small int boundaries: float -> uint8/int8/int16 wraps through int32
                                256.0,
                                300.0,
                                -129.0,
                                32768.5,
                                -40000.0};
  std::uniform_int_distribution<uint64_t> bits;
  std::uniform_real_distribution<double> uni(-70000, 70000);
  switch (t) {
    case kBool:
      for (int i = 0; i < 64; ++i) out.push_back(static_cast<uint8_t>(i & 1));
      break;
    case DType::UInt8:
    case DType::Int8:  // every bit pattern
      for (int i = 0; i < 256; ++i) out.push_back(static_cast<uint8_t>(i));
      break;
    case DType::Int16:
      for (int i = 0; i < 65536; ++i) {
        const auto x = static_cast<uint16_t>(i);
        push(&x, 2);
      }
      break;
    case I32:
      for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{65504}, int64_t{65520}, int64_t{16777217},
                        int64_t{2147483647}, int64_t{-2147483647} - 1}) {
        const auto x = static_cast<int32_t>(v);
        push(&x, 4);
      }
      for (int i = 0; i < 4000; ++i) {
        const auto x = static_cast<int32_t>(static_cast<uint32_t>(bits(g)) >> (bits(g) % 32));
        const int32_t y = (i & 1) ? x : -x;
        push(&y, 4);
      }
      break;
    case I64:
      for (int64_t x : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{65520}, int64_t{9007199254740993},
                        std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
        push(&x, 8);
      }
      for (int i = 0; i < 4000; ++i) {
        const auto x = static_cast<int64_t>(bits(g) >> (bits(g) % 64));
        const int64_t y = (i & 1) ? x : -x;
        push(&y, 8);
      }
      break;
    case F16:
    case BF16:
      for (uint32_t h = 0; h < 65536; ++h) {  // exhaustive
        const auto x = static_cast<uint16_t>(h);
        push(&x, 2);
      }
      break;
    case F32:
      for (double d : floats) {
        const auto x = static_cast<float>(d);
        push(&x, 4);
      }
      for (int i = 0; i < 20000; ++i) {
        float x;
        if (i % 3 == 0) {
          const auto b = static_cast<uint32_t>(bits(g));
          std::memcpy(&x, &b, 4);
        } else if (i % 3 == 1) {
          x = static_cast<float>(uni(g));
        } else {  // near a float16 / bfloat16 rounding boundary
          const float h = dsl::half_bits_to_float(static_cast<uint16_t>(bits(g) & 0x7bff));
          x = std::nextafter(h, 0.0f) + (h - std::nextafter(h, 0.0f)) * 0.5f * static_cast<float>(bits(g) % 3);
        }
        push(&x, 4);
      }
      break;
    case F64:
      for (double x : floats) push(&x, 8);
      for (int i = 0; i < 20000; ++i) {
        double x;
        if (i % 3 == 0) {
          const uint64_t b = bits(g);
          std::memcpy(&x, &b, 8);
        } else if (i % 3 == 1) {
          x = uni(g);
        } else {  // exactly halfway between two float16 values, or a hair off
          const double h = dsl::half_bits_to_float(static_cast<uint16_t>(bits(g) & 0x7bfe));
          const double next = dsl::half_bits_to_float(static_cast<uint16_t>((bits(g) & 0x7bfe) + 1));
          x = (h + next) / 2 + (static_cast<int>(bits(g) % 3) - 1) * 1e-12 * h;
        }
        push(&x, 8);
      }
      break;
  }
  return out;
}

TEST(LlvmBackend, CastsBetweenAllDTypesMatchInterpreterBitForBit) {
  auto g = test::rng(4);
  for (DType from : dsl::kAllDTypes) {
    Arg in;
    in.is_buffer = true;
    in.dtype = from;
    in.bytes = cast_inputs(from, g);
    const size_t n = in.size();
    LoweredFunc f;
    f.name = std::string("cast_from_") + dsl::dtype_name(from);
    f.params = {buf("x", from)};
    std::vector<Arg> args = {in};
    std::vector<Stmt> stores;
    for (DType to : dsl::kAllDTypes) {
      const std::string out = std::string("out_") + dsl::dtype_name(to);
      f.params.push_back(buf(out, to, true));
      args.push_back(zeros(to, n));
      stores.push_back(dsl::make_store(out, v64("i"), dsl::cast(to, ld(from, "x", v64("i")))));
    }
    f.params.push_back(scalar("n"));
    args.push_back(int_arg(static_cast<int64_t>(n)));
    f.body = dsl::make_for("i", 0, v64("n"), ForKind::Serial, dsl::make_block(stores));
    auto [got, want] = run_both(f, args);
    for (size_t k = 1; k + 1 < args.size(); ++k) {
      expect_same(got[k], want[k], std::string(dsl::dtype_name(from)) + " -> " + dsl::dtype_name(got[k].dtype),
                  [&](size_t i) { return std::to_string(value_at(in, i)); });
    }
  }
}

TEST(LlvmBackend, HalfRoundTripsKeepValuesNaNsAndInfinities) {
  for (DType h : {F16, BF16}) {
    LoweredFunc f = elementwise(std::string("roundtrip_") + dsl::dtype_name(h), {buf("out", h, true), buf("x", h)},
                                "out", [&](Expr i) { return dsl::cast(h, dsl::cast(F32, ld(h, "x", i))); });
    std::vector<uint16_t> all(65536);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<Arg> args = {zeros(h, all.size()), buffer_of(h, all), int_arg(65536)};
    run_jit(f, args);
    for (size_t i = 0; i < all.size(); ++i)
      ASSERT_EQ(args[0].at<uint16_t>(i), all[i]) << dsl::dtype_name(h) << " " << i;
  }
}

// The quiet bit of a floating type's NaNs, in its bits (0 for types the interpreter keeps exactly).
uint64_t quiet_bit(DType t) {
  return t == F32 ? 0x400000u : t == F16 ? 0x200u : t == BF16 ? 0x40u : 0u;
}

// Reinterpret keeps every bit: each pair of same-sized types (NaN payloads, signaling NaNs and
// subnormals included), in a serial loop and in vector lanes, and after a float32 round trip of a
// half (the CPU's conversions keep every NaN's bits). The interpreter agrees except that it quiets
// signaling NaNs of float32 and narrower (it holds values as doubles).
TEST(LlvmBackend, ReinterpretKeepsEveryBit) {
  auto g = test::rng(23);
  const std::vector<std::pair<DType, DType> > pairs = {{F32, I32},
                                                       {I32, F32},
                                                       {F64, I64},
                                                       {I64, F64},
                                                       {F16, DType::Int16},
                                                       {BF16, DType::Int16},
                                                       {DType::Int16, F16},
                                                       {DType::Int16, BF16},
                                                       {F16, BF16},
                                                       {DType::UInt8, DType::Int8},
                                                       {DType::Int8, DType::UInt8}};
  for (const auto& [from, to] : pairs) {
    const size_t w = static_cast<size_t>(dsl::dtype_size(from));
    const size_t n = w <= 2 ? (size_t{1} << (8 * w)) : 4100;  // every pattern of 1 and 2 bytes
    Arg in;
    in.is_buffer = true;
    in.dtype = from;
    in.bytes.resize(n * w);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t bits = w <= 2 ? i : g();
      std::memcpy(in.bytes.data() + i * w, &bits, w);  // little-endian: the low bytes
    }
    const auto value = [from = from, to = to](const Expr& i) {
      const Expr x = ld(from, "x", i);
      return dsl::reinterpret(to, is_half(from) ? dsl::cast(from, dsl::cast(F32, x)) : x);
    };
    const std::string name = std::string("bits_") + dsl::dtype_name(from) + "_" + dsl::dtype_name(to);
    LoweredFunc serial = elementwise(name, {buf("out", to, true), buf("x", from)}, "out", value);
    LoweredFunc lanes = serial;  // for o: for l in [0, 4) vectorized (n is a multiple of 4)
    lanes.name += "_lanes";
    const Expr k = v64("o") * 4 + v64("l");
    lanes.body = dsl::make_for("o", 0, v64("n") / 4, ForKind::Serial,
                               dsl::make_for("l", 0, 4, ForKind::Vectorized, dsl::make_store("out", k, value(k))));
    for (LoweredFunc* f : {&serial, &lanes}) {
      f->body = dsl::simplify(f->body);
      std::vector<Arg> args = {zeros(to, n), in, int_arg(static_cast<int64_t>(n))};
      auto [got, want] = run_both(*f, args);
      EXPECT_EQ(got[0].bytes, in.bytes) << f->name;
      for (size_t e = 0; e < n; ++e) {
        uint64_t a = 0, b = 0;
        std::memcpy(&a, in.bytes.data() + e * w, w);
        std::memcpy(&b, want[0].bytes.data() + e * w, w);
        const uint64_t q = quiet_bit(from) | quiet_bit(to);  // one conversion may quiet both
        const bool quieted = q && (b & ~q) == (a & ~q) && (b & q) != 0 &&
                             (std::isnan(value_at(in, e)) || std::isnan(value_at(want[0], e)));
        ASSERT_TRUE(a == b || quieted) << f->name << " interpreter, element " << e << ": " << a << " -> " << b;
      }
    }
  }
  EXPECT_THROW(dsl::reinterpret(I32, ld(F64, "x", v64("i"))), std::invalid_argument);
  EXPECT_THROW(dsl::reinterpret(kBool, ld(DType::UInt8, "x", v64("i"))), std::invalid_argument);
}

LoweredFunc binary_kernel(const std::string& name, DType t, DType out_t, const std::function<Expr(Expr, Expr)>& op) {
  return elementwise(name, {buf("out", out_t, true), buf("a", t), buf("b", t)}, "out",
                     [&](Expr i) { return op(ld(t, "a", i), ld(t, "b", i)); });
}

TEST(LlvmBackend, IntegerDivModTruncateLikeTheInterpreter) {
  auto g = test::rng(6);
  for (DType t : {I32, I64}) {
    const int64_t lo = t == I32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
    std::vector<int64_t> a = {7, -7, 7, -7, lo, lo, lo, 0, 1, -1};
    std::vector<int64_t> b = {2, 2, -2, -2, -1, 1, 7, 5, lo, -1};
    std::uniform_int_distribution<int64_t> d(-1000, 1000), big(lo / 2, -(lo / 2));
    for (int i = 0; i < 2000; ++i) {
      a.push_back(i % 2 ? d(g) : big(g));
      int64_t y = i % 3 ? d(g) : big(g);
      b.push_back(y == 0 ? 3 : y);
    }
    for (bool mod : {false, true}) {
      const std::string name = std::string(mod ? "mod_" : "div_") + dsl::dtype_name(t);
      const LoweredFunc f = binary_kernel(name, t, t, [&](Expr x, Expr y) { return mod ? x % y : x / y; });
      std::vector<Arg> args;
      if (t == I32) {
        std::vector<int32_t> a32(a.begin(), a.end()), b32(b.begin(), b.end());
        args = {zeros(t, a.size()), buffer_of(t, a32), buffer_of(t, b32), int_arg(static_cast<int64_t>(a.size()))};
      } else {
        args = {zeros(t, a.size()), buffer_of(t, a), buffer_of(t, b), int_arg(static_cast<int64_t>(a.size()))};
      }
      auto [got, want] = run_both(f, args);
      expect_same(got[0], want[0], name, [&](size_t i) { return std::to_string(a[i]) + " , " + std::to_string(b[i]); });
      // Division by zero yields 0 instead of trapping (documented; the interpreter throws).
      std::vector<Arg> zero_args = {zeros(I64, 2), buffer_of(I64, std::vector<int64_t>{5, -5}),
                                    buffer_of(I64, std::vector<int64_t>{0, 0}), int_arg(2)};
      if (t == I64) {
        std::vector<int64_t> sentinel = {99, 99};
        zero_args[0] = buffer_of(I64, sentinel);
        run_jit(f, zero_args);
        EXPECT_EQ(zero_args[0].at<int64_t>(0), 0);
        EXPECT_EQ(zero_args[0].at<int64_t>(1), 0);
      }
    }
  }
}

TEST(LlvmBackend, FloatMinMaxPropagateNaNAndOrderSignedZeros) {
  const std::vector<double> vals = {0.0, -0.0, 1.0, -1.0, kInf, -kInf, kNaN, 3.5};
  for (DType t : {F32, F64}) {
    std::vector<double> a, b;
    for (double x : vals) {
      for (double y : vals) {
        a.push_back(x);
        b.push_back(y);
      }
    }
    for (bool is_max : {false, true}) {
      const LoweredFunc f = binary_kernel(std::string(is_max ? "max_" : "min_") + dsl::dtype_name(t), t, t,
                                          [&](Expr x, Expr y) { return is_max ? dsl::max(x, y) : dsl::min(x, y); });
      std::vector<Arg> args;
      if (t == F32) {
        std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
        args = {zeros(t, a.size()), buffer_of(t, af), buffer_of(t, bf), int_arg(static_cast<int64_t>(a.size()))};
      } else {
        args = {zeros(t, a.size()), buffer_of(t, a), buffer_of(t, b), int_arg(static_cast<int64_t>(a.size()))};
      }
      auto [got, want] = run_both(f, args);
      expect_same(got[0], want[0], is_max ? "max" : "min",
                  [&](size_t i) { return std::to_string(a[i]) + " , " + std::to_string(b[i]); });
    }
  }
}

TEST(LlvmBackend, ComparisonsLogicAndBoolBuffers) {
  auto g = test::rng(7);
  const size_t n = 3000;
  std::vector<float> a = random_floats(g, n, -3, 3), b = random_floats(g, n, -3, 3);
  a[0] = b[1] = static_cast<float>(kNaN);
  b[2] = a[2];
  const LoweredFunc f = binary_kernel("logic", F32, kBool, [](Expr x, Expr y) {
    return ((x < y) && !(x == y)) || ((x >= y) && (x != f32c(1.0))) || call1(Intrinsic::IsNan, x);
  });
  std::vector<Arg> args = {zeros(kBool, n), buffer_of(F32, a), buffer_of(F32, b), int_arg(static_cast<int64_t>(n))};
  auto [got, want] = run_both(f, args);
  expect_same(got[0], want[0], "logic");
  // Bool loads and stores: out = !x (as bytes 0/1).
  const LoweredFunc g2 = elementwise("bool_not", {buf("out", kBool, true), buf("x", kBool)}, "out",
                                     [](Expr i) { return !ld(kBool, "x", i); });
  std::vector<Arg> bargs = {zeros(kBool, 5), buffer_of(kBool, std::vector<uint8_t>{0, 1, 1, 0, 1}), int_arg(5)};
  run_jit(g2, bargs);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(bargs[0].at<uint8_t>(i), i == 0 || i == 3 ? 1 : 0);
}

// Inputs for float intrinsics: specials, extremes and random magnitudes over the whole range.
std::vector<double> intrinsic_inputs(std::mt19937_64& g, bool f32) {
  std::vector<double> v = {0.0,    -0.0,   kInf,    -kInf, kNaN,  1.0,   -1.0,   0.5,    2.0,    1e-45,   -1e-45,
                           1e-40,  1e-38,  1.2e-38, 88.72, 88.73, 89.0,  -87.3,  -103.0, -104.0, -150.0,  0.625,
                           -0.625, 0.6249, 4.0,     -4.0,  3.9,   10.0,  1e10,   -1e10,  3.4e38, -3.4e38, 0.7071,
                           0.7072, 1e-7,   -1e-7,   1e-20, 709.0, 710.0, -745.0, 1e300};
  std::uniform_real_distribution<double> uni(-12, 12), expo(f32 ? -140 : -1070, f32 ? 127 : 1023);
  std::uniform_int_distribution<uint64_t> bits;
  for (int i = 0; i < 30000; ++i) {
    double x;
    switch (i % 3) {
      case 0:
        x = uni(g);
        break;
      case 1:
        x = std::ldexp(1.0 + static_cast<double>(bits(g) % 1000000) / 1e6, static_cast<int>(expo(g)));
        break;
      default:
        if (f32) {
          const auto b = static_cast<uint32_t>(bits(g));
          float y;
          std::memcpy(&y, &b, 4);
          x = y;
        } else {
          const uint64_t b = bits(g);
          std::memcpy(&x, &b, 8);
        }
    }
    v.push_back((bits(g) & 1) ? x : -x);
  }
  if (f32) {
    for (double& x : v) x = static_cast<float>(x);
  }
  return v;
}

double reference(Intrinsic fn, double x, double y) {
  switch (fn) {
    case Intrinsic::Neg:
      return -x;
    case Intrinsic::Abs:
      return std::fabs(x);
    case Intrinsic::Exp:
      return std::exp(x);
    case Intrinsic::Log:
      return std::log(x);
    case Intrinsic::Sqrt:
      return std::sqrt(x);
    case Intrinsic::Rsqrt:
      return 1.0 / std::sqrt(x);
    case Intrinsic::Tanh:
      return std::tanh(x);
    case Intrinsic::Erf:
      return std::erf(x);
    case Intrinsic::Pow:
      return std::pow(x, y);
    case Intrinsic::Floor:
      return std::floor(x);
    case Intrinsic::Ceil:
      return std::ceil(x);
    case Intrinsic::IsNan:
      return std::isnan(x) ? 1 : 0;
    default:  // intrinsics added later are tested in test_ops_more
      return 0;
  }
  return 0;
}

// Allowed error of a float32 result `got` against the double reference.
bool f32_close(Intrinsic fn, float got, double ref) {
  if (std::isnan(ref) || std::isinf(ref)) return ulps_f32(got, ref) == 0;
  switch (fn) {
    case Intrinsic::Exp:
    case Intrinsic::Log:
      return ulps_f32(got, ref) <= 2;
    case Intrinsic::Pow:
      return ulps_f32(got, ref) <= 1;
    case Intrinsic::Tanh:
      return std::fabs(got - ref) <= 1e-6 * std::fabs(ref) + 1e-38;
    case Intrinsic::Erf:
      return std::fabs(got - ref) <= 1e-6;
    default:  // correctly rounded (rsqrt: 1 / sqrt in double, rounded once, as the interpreter)
      return got == static_cast<float>(ref) && std::signbit(got) == std::signbit(static_cast<float>(ref));
  }
}

TEST(LlvmBackend, FloatIntrinsicsOverEdgeAndRandomInputs) {
  auto g = test::rng(8);
  for (DType t : {F32, F64}) {
    const bool f32 = t == F32;
    const std::vector<double> xs = intrinsic_inputs(g, f32);
    std::vector<double> ys(xs.size());
    std::uniform_real_distribution<double> ey(-5, 5);
    const std::vector<double> special_y = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -2.0, kInf, -kInf, kNaN};
    for (size_t i = 0; i < ys.size(); ++i) ys[i] = i % 4 == 0 ? special_y[(i / 4) % special_y.size()] : ey(g);
    if (f32) {
      for (double& y : ys) y = static_cast<float>(y);
    }
    const auto n = static_cast<int64_t>(xs.size());
    for (Intrinsic fn :
         {Intrinsic::Neg, Intrinsic::Abs, Intrinsic::Exp, Intrinsic::Log, Intrinsic::Sqrt, Intrinsic::Rsqrt,
          Intrinsic::Tanh, Intrinsic::Erf, Intrinsic::Pow, Intrinsic::Floor, Intrinsic::Ceil, Intrinsic::IsNan}) {
      const DType out_t = fn == Intrinsic::IsNan ? kBool : t;
      const std::string name = std::string("fn_") + dsl::intrinsic_name(fn) + "_" + dsl::dtype_name(t);
      const LoweredFunc f = binary_kernel(name, t, out_t, [&](Expr x, Expr y) {
        return fn == Intrinsic::Pow ? dsl::call(fn, {x, y}) : call1(fn, x);
      });
      std::vector<Arg> args;
      if (f32) {
        std::vector<float> xf(xs.begin(), xs.end()), yf(ys.begin(), ys.end());
        args = {zeros(out_t, xs.size()), buffer_of(t, xf), buffer_of(t, yf), int_arg(n)};
      } else {
        args = {zeros(out_t, xs.size()), buffer_of(t, xs), buffer_of(t, ys), int_arg(n)};
      }
      run_jit(f, args);
      int failures = 0;
      for (size_t i = 0; i < xs.size() && failures < 10; ++i) {
        const double ref = reference(fn, xs[i], ys[i]);
        bool ok;
        if (fn == Intrinsic::IsNan) {
          ok = args[0].at<uint8_t>(i) == ref;
        } else if (f32) {
          ok = f32_close(fn, args[0].at<float>(i), ref);
        } else {
          const double got = args[0].at<double>(i);
          ok = ulps_f64(got, ref) <= (fn == Intrinsic::Rsqrt ? 1 : 0.5) || (got == ref);
          if (!std::isnan(ref) && ref == 0) ok = got == 0;
        }
        if (!ok) {
          ++failures;
          ADD_FAILURE() << name << "(" << xs[i] << (fn == Intrinsic::Pow ? ", " + std::to_string(ys[i]) : "")
                        << ") = " << value_at(args[0], i) << ", expected " << ref;
        }
      }
    }
  }
}

// C's math functions (tan ... erfc, atan2, hypot) are libm calls: float64 gives libm's double result
// exactly, float32 the float function's (within 4 ulp of the double result: glibc's erfcf and
// friends are not correctly rounded), vectorized
// loops included (one call per lane).
TEST(LlvmBackend, CMathIntrinsicsCallLibm) {
  auto g = test::rng(9);
  const std::vector<std::pair<Intrinsic, double (*)(double, double)> > fns = {
      {Intrinsic::Tan, [](double x, double) { return std::tan(x); }},
      {Intrinsic::Atan, [](double x, double) { return std::atan(x); }},
      {Intrinsic::Asin, [](double x, double) { return std::asin(x); }},
      {Intrinsic::Acos, [](double x, double) { return std::acos(x); }},
      {Intrinsic::Sinh, [](double x, double) { return std::sinh(x); }},
      {Intrinsic::Cosh, [](double x, double) { return std::cosh(x); }},
      {Intrinsic::Asinh, [](double x, double) { return std::asinh(x); }},
      {Intrinsic::Acosh, [](double x, double) { return std::acosh(x); }},
      {Intrinsic::Atanh, [](double x, double) { return std::atanh(x); }},
      {Intrinsic::Log2, [](double x, double) { return std::log2(x); }},
      {Intrinsic::Log10, [](double x, double) { return std::log10(x); }},
      {Intrinsic::Exp2, [](double x, double) { return std::exp2(x); }},
      {Intrinsic::Erfc, [](double x, double) { return std::erfc(x); }},
      {Intrinsic::Atan2, [](double x, double y) { return std::atan2(x, y); }},
      {Intrinsic::Hypot, [](double x, double y) { return std::hypot(x, y); }},
  };
  for (DType t : {F32, F64}) {
    const bool f32 = t == F32;
    std::vector<double> xs = intrinsic_inputs(g, f32);
    xs.resize(3001);  // an odd count: vector body and scalar tail
    std::vector<double> ys(xs.size());
    std::uniform_real_distribution<double> ey(-5, 5);
    for (double& y : ys) y = f32 ? static_cast<float>(ey(g)) : ey(g);
    const auto n = static_cast<int64_t>(xs.size());
    for (const auto& [fn, ref_fn] : fns) {
      const std::string name = std::string("cm_") + dsl::intrinsic_name(fn) + "_" + dsl::dtype_name(t);
      const LoweredFunc f = binary_kernel(name, t, t, [&, fn = fn](Expr x, Expr y) {
        return dsl::intrinsic_arity(fn) == 2 ? dsl::call(fn, {x, y}) : call1(fn, x);
      });
      std::vector<Arg> args;
      if (f32) {
        std::vector<float> xf(xs.begin(), xs.end()), yf(ys.begin(), ys.end());
        args = {zeros(t, xs.size()), buffer_of(t, xf), buffer_of(t, yf), int_arg(n)};
      } else {
        args = {zeros(t, xs.size()), buffer_of(t, xs), buffer_of(t, ys), int_arg(n)};
      }
      run_jit(f, args);
      int failures = 0;
      for (size_t i = 0; i < xs.size() && failures < 10; ++i) {
        const double ref = ref_fn(xs[i], ys[i]);
        bool ok;
        if (f32) {
          const float got = args[0].at<float>(i);
          const float want = static_cast<float>(ref);
          ok = (std::isnan(want) && std::isnan(got)) || got == want || (std::isfinite(want) && ulps_f32(got, ref) <= 4);
        } else {
          const double got = args[0].at<double>(i);
          ok = (std::isnan(ref) && std::isnan(got)) || got == ref;
        }
        if (!ok) {
          ++failures;
          ADD_FAILURE() << name << "(" << xs[i] << ", " << ys[i] << ") = " << value_at(args[0], i) << ", expected "
                        << ref;
        }
      }
    }
  }
}

// The address space as the emulated device's 16 GiB reservation left it when loaded kernels broke
// (jit/llvm/code_region.h), made on purpose: every hole among the mappings near the top is filled
// (PROT_NONE) but one, the top of a 4 GiB reservation below them. A memory manager that maps
// an object's code, constants and GOT one by one wherever the kernel puts them then gets the
// hole for the code (when the hole's size is the code's) and the rest below the reservation, out of
// reach of 32-bit displacements.
// (mmap places a mapping without a hint in the highest hole that fits, below the stack's gap.)
class FragmentedAddressSpace {
 public:
  explicit FragmentedAddressSpace(size_t hole_pages) {
    const size_t reserved = size_t{4} << 30, hole = hole_pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    char* low = map_at(0, reserved);
    struct Range {
      uintptr_t lo, hi;
      bool stack;
    };
    std::vector<Range> ranges;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
      Range r{};
      r.lo = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
      r.hi = std::stoull(line.substr(line.find('-') + 1, line.find(' ')), nullptr, 16);
      r.stack = line.find("[stack]") != std::string::npos;
      ranges.push_back(r);
      if (r.stack) break;  // (above it: vsyscall)
    }
    // The holes above the largest one (the space between the heap and the mapping area, now below
    // the reservation), except the one below the stack (the stack grows into it; mmap does not
    // place mappings there).
    size_t big = 0;
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].lo - ranges[i - 1].hi > ranges[big + 1].lo - ranges[big].hi) big = i - 1;
    for (size_t i = big + 2; i < ranges.size(); ++i)
      if (!ranges[i].stack && ranges[i].lo > ranges[i - 1].hi)
        map_at(ranges[i - 1].hi, ranges[i].lo - ranges[i - 1].hi);
    // The one hole: the reservation's top pages.
    if (low != nullptr) {
      ::munmap(low + reserved - hole, hole);
      maps_.front().second = reserved - hole;
    }
  }
  ~FragmentedAddressSpace() {
    for (const auto& [p, bytes] : maps_) ::munmap(p, bytes);
  }
  FragmentedAddressSpace(const FragmentedAddressSpace&) = delete;
  FragmentedAddressSpace& operator=(const FragmentedAddressSpace&) = delete;

 private:
  char* map_at(uintptr_t where, size_t bytes) {
    void* p = ::mmap(reinterpret_cast<void*>(where), bytes, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (where ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (p == MAP_FAILED) return nullptr;
    maps_.emplace_back(p, bytes);
    return static_cast<char*>(p);
  }
  std::vector<std::pair<void*, size_t> > maps_;
};

// An object's sections reach one another through 32-bit displacements (constants, GOT entries,
// call stubs), so the loader keeps them together however fragmented the address space is. Each
// load (of a kernel that calls libm through a stub and reads vector constants) is run and checked.
TEST(LlvmBackend, ObjectsStayWholeInAFragmentedAddressSpace) {
  const DType t = F32;
  const LoweredFunc f = binary_kernel("frag_tan_atan2", t, t, [](Expr x, Expr y) {
    return call1(Intrinsic::Tan, x) * f32c(1.2345) + dsl::call(Intrinsic::Atan2, {x, y * f32c(0.75)});
  });
  const std::string object = compile_to_object(f);
  auto g = test::rng(17);
  const size_t n = 1003;
  const std::vector<float> xs = random_floats(g, n, -1.5, 1.5), ys = random_floats(g, n, -2, 2);
  for (int k = 1; k <= 8; ++k) {  // holes of 1 to 8 pages: one of them fits the code exactly
    CpuKernelFn fn = nullptr;
    {
      const FragmentedAddressSpace fragmented(static_cast<size_t>(k));
      fn = CpuKernelLoader().load(object, f.name);
    }
    EXPECT_TRUE(CpuKernelLoader::holds(reinterpret_cast<const void*>(fn))) << "load " << k;
    std::vector<Arg> args = {zeros(t, n), buffer_of(t, xs), buffer_of(t, ys), int_arg(static_cast<int64_t>(n))};
    std::vector<ArgValue> v = abi(args);
    fn(v.data());
    for (size_t i = 0; i < n; ++i) {
      const double want = std::tan(static_cast<double>(xs[i])) * static_cast<double>(1.2345f) +
                          std::atan2(static_cast<double>(xs[i]), static_cast<double>(ys[i] * 0.75f));
      ASSERT_NEAR(args[0].at<float>(i), want, 1e-5 * (1 + std::fabs(want))) << "load " << k << ", element " << i;
    }
  }
  EXPECT_LE(CpuKernelLoader::code_regions(), size_t{2});  // a few KiB per object, 1 GiB per region
}

TEST(LlvmBackend, AnObjectTooLargeForACodeRegionIsRefusedClearly) {
  const std::string huge(size_t{40} << 20, '\0');
  try {
    CpuKernelLoader().load(huge, "huge");
    FAIL() << "a 40 MiB object loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'huge' is 40 MiB; CPU kernel objects are limited to 32 MiB"),
              std::string::npos)
        << e.what();
  }
}

TEST(LlvmBackend, IntegerIntrinsicsWrap) {
  for (DType t : {I32, I64}) {
    const int64_t lo = t == I32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
    const std::vector<int64_t> xs = {0, 1, -1, 5, -5, lo, -(lo + 1)};
    for (Intrinsic fn : {Intrinsic::Neg, Intrinsic::Abs, Intrinsic::Floor, Intrinsic::Ceil}) {
      const LoweredFunc f =
          elementwise(std::string("ifn_") + dsl::intrinsic_name(fn) + dsl::dtype_name(t),
                      {buf("out", t, true), buf("x", t)}, "out", [&](Expr i) { return call1(fn, ld(t, "x", i)); });
      std::vector<Arg> args;
      const auto n = static_cast<int64_t>(xs.size());
      if (t == I32) {
        args = {zeros(t, xs.size()), buffer_of(t, std::vector<int32_t>(xs.begin(), xs.end())), int_arg(n)};
      } else {
        args = {zeros(t, xs.size()), buffer_of(t, xs), int_arg(n)};
      }
      auto [got, want] = run_both(f, args);
      expect_same(got[0], want[0], dsl::intrinsic_name(fn));
    }
  }
}

// The bitwise intrinsics against the interpreter: and/or/xor, and the shifts with counts brought
// into [0, bits) as the ops bring them (here by masking), over extremes and random values, in
// vectorized loops with a scalar tail.
TEST(LlvmBackend, BitwiseIntrinsicsMatchTheInterpreter) {
  auto g = test::rng(17);
  for (DType t : {I32, I64}) {
    const int64_t lo = t == I32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
    const int64_t bits = t == I32 ? 32 : 64;
    std::vector<int64_t> a = {0, 1, -1, lo, -(lo + 1), 12345, -12345};
    std::vector<int64_t> b = {0, 31, 63, 1, -1, 7, 200};
    std::uniform_int_distribution<int64_t> d(lo / 2, -(lo / 2)), c(-100, 100);
    while (a.size() < 1001) {
      a.push_back(d(g));
      b.push_back(c(g));
    }
    const auto n = static_cast<int64_t>(a.size());
    for (Intrinsic fn : {Intrinsic::BitAnd, Intrinsic::BitOr, Intrinsic::BitXor, Intrinsic::Shl, Intrinsic::Shr}) {
      const bool shift = fn == Intrinsic::Shl || fn == Intrinsic::Shr;
      const LoweredFunc f =
          binary_kernel(std::string("bit_") + dsl::intrinsic_name(fn) + dsl::dtype_name(t), t, t, [&](Expr x, Expr y) {
            const Expr count = shift ? dsl::call(Intrinsic::BitAnd, {y, dsl::make_int(bits - 1, t)}) : y;
            return dsl::call(fn, {x, count});
          });
      std::vector<Arg> args;
      if (t == I32) {
        args = {zeros(t, a.size()), buffer_of(t, std::vector<int32_t>(a.begin(), a.end())),
                buffer_of(t, std::vector<int32_t>(b.begin(), b.end())), int_arg(n)};
      } else {
        args = {zeros(t, a.size()), buffer_of(t, a), buffer_of(t, b), int_arg(n)};
      }
      auto [got, want] = run_both(f, args);
      expect_same(got[0], want[0], dsl::intrinsic_name(fn));
      // Spot checks of the interpreter itself: 1 << 31 and -1 << 31 are the sign bit; lo >> 1 keeps it.
      if (fn == Intrinsic::Shl && t == I32) {
        EXPECT_EQ(want[0].at<int32_t>(1), std::numeric_limits<int32_t>::min());
        EXPECT_EQ(want[0].at<int32_t>(2), std::numeric_limits<int32_t>::min());
      }
      if (fn == Intrinsic::Shr && t == I64) {
        EXPECT_EQ(want[0].at<int64_t>(3), lo / 2);
      }
    }
  }
  EXPECT_THROW(dsl::call(Intrinsic::BitAnd, {dsl::make_float(1.0, F32), dsl::make_float(2.0, F32)}),
               std::invalid_argument);
}

// Integer Pow is torch's powi (a loop of squarings that wraps; negative exponents give 1, +-1 or 0):
// against the interpreter over extremes, large and negative exponents, in vectorized loops whose
// lanes run different numbers of squarings, and the interpreter against known wrapped powers.
TEST(LlvmBackend, IntegerPowWrapsLikeTheInterpreter) {
  auto g = test::rng(29);
  for (DType t : {I32, I64}) {
    const int64_t lo = t == I32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
    std::vector<int64_t> a = {3, 3, 7, 0, 1, -1, -1, 2, -2, lo, 5, 1, -1, 0};
    std::vector<int64_t> b = {40, 21, 0, 0, -5, -3, -4, -1, 64, 2, -(lo + 1), lo, lo, 7};
    std::uniform_int_distribution<int64_t> d(lo / 2, -(lo / 2)), e(-3, 80);
    while (a.size() < 1001) {
      a.push_back(d(g));
      b.push_back(a.size() % 7 == 0 ? d(g) : e(g));
    }
    const LoweredFunc f = binary_kernel(std::string("ipow_") + dsl::dtype_name(t), t, t, [](Expr x, Expr y) {
      return dsl::call(Intrinsic::Pow, {x, y});
    });
    std::vector<Arg> args;
    if (t == I32) {
      args = {zeros(t, a.size()), buffer_of(t, std::vector<int32_t>(a.begin(), a.end())),
              buffer_of(t, std::vector<int32_t>(b.begin(), b.end())), int_arg(static_cast<int64_t>(a.size()))};
    } else {
      args = {zeros(t, a.size()), buffer_of(t, a), buffer_of(t, b), int_arg(static_cast<int64_t>(a.size()))};
    }
    auto [got, want] = run_both(f, args);
    expect_same(got[0], want[0], "pow");
    const auto at = [&, w = want[0]](size_t i) { return t == I32 ? int64_t{w.at<int32_t>(i)} : w.at<int64_t>(i); };
    EXPECT_EQ(at(0), t == I32 ? int64_t{689956897} : int64_t{-6289078614652622815});  // 3^40, wrapped
    EXPECT_EQ(at(1), t == I32 ? int64_t{1870418611} : int64_t{10460353203});          // 3^21
    // 7^0, 0^0, 1^-5, (-1)^-3, (-1)^-4, 2^-1, (-2)^64, lo^2, then (5^big), 1^lo, (-1)^lo, 0^7
    const std::vector<int64_t> small = {1, 1, 1, -1, 1, 0, 0, 0, 5, 1, 1, 0};
    for (size_t i = 2; i < 2 + small.size(); ++i) {
      if (i != 10) {
        EXPECT_EQ(at(i), small[i - 2]) << i;
      }
    }
  }
}

// out[i] += 1 over a parallel loop [m, m + n): each element exactly once.
LoweredFunc parallel_increment() {
  LoweredFunc f;
  f.name = "par_inc";
  f.params = {buf("out", I32, true), scalar("m"), scalar("n")};
  const Expr i = v64("i");
  f.body = dsl::make_for("i", v64("m"), v64("n"), ForKind::Parallel,
                         dsl::make_store("out", i, ld(I32, "out", i) + dsl::make_int(1, I32)));
  return f;
}

TEST(LlvmBackend, ParallelLoopCoversEveryIterationOnce) {
  const CpuKernelFn fn = jit(parallel_increment());
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1001}, int64_t{100003}}) {
    for (int64_t m : {int64_t{0}, int64_t{3}}) {
      std::vector<Arg> args = {zeros(I32, static_cast<size_t>(n + m + 2)), int_arg(m), int_arg(n)};
      std::vector<ArgValue> v = abi(args);
      fn(v.data());
      for (int64_t k = 0; k < n + m + 2; ++k) {
        ASSERT_EQ(args[0].at<int32_t>(static_cast<size_t>(k)), (k >= m && k < m + n) ? 1 : 0)
            << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(LlvmBackend, ParallelCapturesLetsLocalsAndNestsSerially) {
  // let s = scale * 2: allocate tab[4]: tab[l] = l; parallel row: parallel col (serial inside):
  //   out[row * cols + col] = x[...] * s + tab[col % 4]
  LoweredFunc f;
  f.name = "par_nest";
  f.params = {buf("out", F32, true), buf("x", F32), scalar("scale", F32), scalar("rows"), scalar("cols")};
  const Expr row = v64("row"), col = v64("col"), cols = v64("cols"), l = v64("l");
  const Expr idx = row * cols + col;
  Stmt inner =
      dsl::make_for("col", 0, cols, ForKind::Parallel,
                    dsl::make_store("out", idx, ld(F32, "x", idx) * dsl::var("s", F32) + ld(F32, "tab", col % 4)));
  Stmt body = dsl::make_allocate(
      "tab", F32, 4, dsl::MemoryScope::Local,
      dsl::make_block({dsl::make_for("l", 0, 4, ForKind::Unrolled, dsl::make_store("tab", l, dsl::cast(F32, l))),
                       dsl::make_for("row", 0, v64("rows"), ForKind::Parallel, inner)}));
  f.body = dsl::make_let("s", dsl::var("scale", F32) * f32c(2.0), body);
  auto g = test::rng(9);
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t> >{{0, 5}, {1, 1}, {3, 5}, {67, 131}}) {
    const size_t total = static_cast<size_t>(rows * cols);
    std::vector<Arg> args = {zeros(F32, total), buffer_of(F32, random_floats(g, total, -1, 1)), float_arg(1.25, F32),
                             int_arg(rows), int_arg(cols)};
    auto [got, want] = run_both(f, args);
    expect_same(got[0], want[0], "par_nest");
  }
}

TEST(LlvmBackend, VectorizedUnrolledIfAndGuardedLoads) {
  // for o in [0, n): for l in [0, 4) vectorized: out[o*4 + l] = x[o*4 + (3 - l)] * 2 + x[o*4]   (reverse gather)
  //                  for l in [0, 4) vectorized: out2[(o*4 + l) * 2 % (n*4)] ... (scatter, non-unit stride)
  //                  if o % 2 == 0: for l in [0, 4) unrolled: out3[o*4+l] = select(o + 1 < n, x[(o+1)*4+l], -1)
  LoweredFunc f;
  f.name = "vec_mix";
  f.params = {buf("out", F32, true), buf("out2", F32, true), buf("out3", F32, true), buf("x", F32), scalar("n")};
  const Expr o = v64("o"), l = v64("l"), n = v64("n");
  Stmt s1 = dsl::make_for(
      "l", 0, 4, ForKind::Vectorized,
      dsl::make_let(
          "k", o * 4 + l,
          dsl::make_store("out", v64("k"), ld(F32, "x", o * 4 + (Expr(3) - l)) * f32c(2.0) + ld(F32, "x", o * 4))));
  Stmt s2 = dsl::make_for("l", 0, 4, ForKind::Vectorized,
                          dsl::make_store("out2", o * 4 + (Expr(3) - l), ld(F32, "x", o * 4 + l)));
  Stmt s3 = dsl::make_if(
      o % 2 == 0, dsl::make_for("l", 0, 4, ForKind::Vectorized,
                                dsl::make_store("out3", o * 4 + l,
                                                dsl::select(o + 1 < n, ld(F32, "x", (o + 1) * 4 + l), f32c(-1)))));
  f.body = dsl::make_for("o", 0, n, ForKind::Serial, dsl::make_block({s1, s2, s3}));
  auto g = test::rng(10);
  for (int64_t n_val : {int64_t{1}, int64_t{2}, int64_t{9}}) {
    const size_t total = static_cast<size_t>(n_val * 4);
    std::vector<Arg> args = {zeros(F32, total), zeros(F32, total), zeros(F32, total),
                             buffer_of(F32, random_floats(g, total, -5, 5)), int_arg(n_val)};
    auto [got, want] = run_both(f, args);
    expect_same(got[0], want[0], "gather");
    expect_same(got[1], want[1], "scatter");
    expect_same(got[2], want[2], "guarded");
  }
}

// Interleaved reads (RGB bytes read one channel at a time): lanes 2 to 4 elements apart load their
// span once and shuffle; the span ends at the last lane's element, so a read at the very end of a
// buffer stays inside it. Wider strides gather.
TEST(LlvmBackend, StridedVectorLoadsShuffleOneContiguousLoad) {
  for (const int64_t stride : {2, 3, 4, 5}) {
    for (const DType t : {DType::UInt8, F32}) {
      // for o in [0, n): for c in [0, stride): for l in [0, 16) vectorized:
      //   out[(o * stride + c) * 16 + l] = float32(x[o * 16 * stride + l * stride + c]) * 2
      LoweredFunc f;
      f.name = "interleaved";
      f.params = {buf("out", F32, true), buf("x", t), scalar("n")};
      const Expr o = v64("o"), c = v64("c"), l = v64("l");
      const Expr src = ld(t, "x", o * (16 * stride) + l * stride + c);
      const Expr val = dsl::cast(F32, t == F32 ? src : dsl::cast(I32, src)) * f32c(2.0);
      f.body = dsl::make_for("o", 0, v64("n"), ForKind::Serial,
                             dsl::make_for("c", 0, stride, ForKind::Serial,
                                           dsl::make_for("l", 0, 16, ForKind::Vectorized,
                                                         dsl::make_store("out", (o * stride + c) * 16 + l, val))));
      const std::string ir = emit_llvm_ir(f);
      const std::string span = "<" + std::to_string(stride * 15 + 1) + " x " + (t == F32 ? "float" : "i8") + ">";
      EXPECT_EQ(ir.find("load " + span) != std::string::npos, stride <= 4) << stride << "\n" << ir;
      auto g = test::rng(12);
      for (int64_t n_val : {int64_t{1}, int64_t{3}}) {
        const size_t total = static_cast<size_t>(n_val * 16 * stride);
        Arg in = t == F32 ? buffer_of(F32, random_floats(g, total, -5, 5)) : zeros(t, total);
        if (t != F32)
          for (size_t i = 0; i < total; ++i) in.bytes[i] = static_cast<uint8_t>(g());
        std::vector<Arg> args = {zeros(F32, total), in, int_arg(n_val)};
        auto [got, want] = run_both(f, args);
        expect_same(got[0], want[0], "stride " + std::to_string(stride));
      }
    }
  }
}

// Loads whose lanes lie at distances from lane 0 known at compile time, but not one stride apart:
// a reversed row (a flip), reversed groups of 3 (a flipped row of RGB pixels in the pointwise
// scheduler's flat loop: pixel start / 3 + l / 3, channel l % 3), and a stride of -3. Each reads the
// span its lanes cover with one vector load and a shuffle; a span wider than 4 elements per lane
// (l * l) or lanes apart by a run-time amount gather instead. Values equal the interpreter's, with
// buffers of exactly the size read, so the span never reaches past the data.
TEST(LlvmBackend, LanesAtKnownDistancesLoadTheirSpanAndShuffle) {
  struct Case {
    std::string name;
    int64_t width, row;  // lanes per step, elements of x per step
    std::function<Expr(Expr, Expr)> index;
    int64_t span;  // 0: gathers
  };
  const std::vector<Case> cases = {
      {"reversed", 16, 16, [](Expr o, Expr l) { return o * 16 + (Expr(int64_t{15}) - l); }, 16},
      {"flipped pixels", 24, 24, [](Expr o, Expr l) { return o * 24 + (Expr(int64_t{7}) - l / 3) * 3 + l % 3; }, 24},
      {"stride -3", 16, 46, [](Expr o, Expr l) { return o * 46 + (Expr(int64_t{15}) - l) * 3; }, 46},
      {"squares", 16, 226, [](Expr o, Expr l) { return o * 226 + l * l; }, 0},
      {"run-time stride", 16, 16, [](Expr o, Expr l) { return o * 16 + (l / v64("n")) * 3 % 16; }, 0},
  };
  for (const Case& c : cases) {
    for (const DType t : {DType::UInt8, F32}) {
      // for o in [0, n): for l in [0, width) vectorized: out[o * width + l] = float32(x[index]) * 2
      LoweredFunc f;
      f.name = "lane_offsets";
      f.params = {buf("out", F32, true), buf("x", t), scalar("n")};
      const Expr o = v64("o"), l = v64("l");
      const Expr src = ld(t, "x", c.index(o, l));
      const Expr val = dsl::cast(F32, t == F32 ? src : dsl::cast(I32, src)) * f32c(2.0);
      f.body = dsl::make_for(
          "o", 0, v64("n"), ForKind::Serial,
          dsl::make_for("l", 0, c.width, ForKind::Vectorized, dsl::make_store("out", o * c.width + l, val)));
      const std::string ir = emit_llvm_ir(f);
      const std::string elem = t == F32 ? "float" : "i8";
      if (c.span > 0) {
        EXPECT_NE(ir.find("load <" + std::to_string(c.span) + " x " + elem + ">"), std::string::npos) << c.name << "\n"
                                                                                                      << ir;
        EXPECT_NE(ir.find("shufflevector"), std::string::npos) << c.name;
      } else {  // a gather: only scalar loads of x
        EXPECT_EQ(ir.find("load <"), std::string::npos) << c.name << "\n" << ir;
      }
      auto g = test::rng(31);
      for (const int64_t n_val : {int64_t{1}, int64_t{3}}) {
        const auto total = static_cast<size_t>(n_val * c.row);
        Arg in = t == F32 ? buffer_of(F32, random_floats(g, total, -5, 5)) : zeros(t, total);
        if (t != F32)
          for (size_t i = 0; i < total; ++i) in.bytes[i] = static_cast<uint8_t>(g());
        std::vector<Arg> args = {zeros(F32, static_cast<size_t>(n_val * c.width)), in, int_arg(n_val)};
        auto [got, want] = run_both(f, args);
        expect_same(got[0], want[0], c.name);
      }
    }
  }
}

// The analysis itself: values where the lane variable's start is a constant, differences from
// lane 0 otherwise, through Let-bound variables; nothing where lanes differ by a run-time amount.
TEST(LlvmBackend, LaneFormsFollowIndexArithmetic) {
  using flow::jit::llvm_backend::ir::lane_form;
  using flow::jit::llvm_backend::ir::LaneForm;
  using flow::jit::llvm_backend::ir::LaneScope;
  LaneScope scope{"l", int64_t{0}, 6, {}};
  const Expr l = v64("l"), u = v64("u");
  auto form = [&](const Expr& e) { return lane_form(e, scope); };
  ASSERT_TRUE(form(l / 3 * 10 + l % 3));
  EXPECT_TRUE(form(l / 3 * 10 + l % 3)->absolute);
  EXPECT_EQ(form(l / 3 * 10 + l % 3)->v, (std::vector<int64_t>{0, 1, 2, 10, 11, 12}));
  EXPECT_EQ(form(u * 7 + (Expr(int64_t{5}) - l) * 2)->v, (std::vector<int64_t>{0, -2, -4, -6, -8, -10}));
  EXPECT_FALSE(form(u * 7 + l)->absolute);
  EXPECT_EQ(form(u * u + u / 3)->v, (std::vector<int64_t>(6, 0)));  // uniform
  EXPECT_FALSE(form(l * u));                                        // a run-time stride
  EXPECT_FALSE(form((u + l) / 3));                                  // lane/3 groups depend on u
  EXPECT_FALSE(form(dsl::min(l, u)));
  scope.lets["p"] = form(u + l / 2);
  scope.lets["q"] = std::nullopt;
  EXPECT_EQ(form(v64("p") * 3)->v, (std::vector<int64_t>{0, 0, 3, 3, 6, 6}));
  EXPECT_FALSE(form(v64("q") + l));
  LaneScope shifted{"l", std::nullopt, 3, {}};  // a loop starting at a run-time value
  ASSERT_TRUE(lane_form(l * 4, shifted));
  EXPECT_FALSE(lane_form(l * 4, shifted)->absolute);
  EXPECT_EQ(lane_form(l * 4, shifted)->v, (std::vector<int64_t>{0, 4, 8}));
  EXPECT_FALSE(lane_form(l % 2, shifted));
}

TEST(LlvmBackend, VectorizedLoopsWithCrossLaneDependencesKeepSerialMeaning) {
  // for o in [0, n): for l in [0, 4) vectorized: acc[0] = acc[0] + x[o*4 + l]          (uniform store)
  //                  for l in [0, 4) vectorized: out[o*4 + l + 1] = out[o*4 + l] + x[o*4 + l]  (reads lane l-1)
  //                  for l in [0, 4) vectorized: ind[o*4 + l] = ind[o*4 + l] * 2 + x[o*4 + l]  (independent lanes)
  LoweredFunc f;
  f.name = "vec_dep";
  f.params = {buf("acc", F32, true), buf("out", F32, true), buf("ind", F32, true), buf("x", F32), scalar("n")};
  const Expr o = v64("o"), l = v64("l"), i = o * 4 + l;
  f.body = dsl::make_for(
      "o", 0, v64("n"), ForKind::Serial,
      dsl::make_block({dsl::make_for("l", 0, 4, ForKind::Vectorized,
                                     dsl::make_store("acc", 0, ld(F32, "acc", 0) + ld(F32, "x", i))),
                       dsl::make_for("l", 0, 4, ForKind::Vectorized,
                                     dsl::make_store("out", i + 1, ld(F32, "out", i) + ld(F32, "x", i))),
                       dsl::make_for("l", 0, 4, ForKind::Vectorized,
                                     dsl::make_store("ind", i, ld(F32, "ind", i) * f32c(2) + ld(F32, "x", i)))}));
  const std::string ir = emit_llvm_ir(f);
  // Only the independent loop becomes vector code (one vector store); the others are unrolled.
  size_t vector_stores = 0;
  for (size_t p = ir.find("store <4 x float>"); p != std::string::npos; p = ir.find("store <4 x float>", p + 1)) {
    ++vector_stores;
  }
  EXPECT_EQ(vector_stores, 1u) << ir;
  auto g = test::rng(12);
  const int64_t n = 5;
  std::vector<Arg> args = {zeros(F32, 1), zeros(F32, 4 * n + 1), buffer_of(F32, random_floats(g, 4 * n, -1, 1)),
                           buffer_of(F32, random_floats(g, 4 * n, -1, 1)), int_arg(n)};
  auto [got, want] = run_both(f, args);
  expect_same(got[0], want[0], "uniform accumulation");
  expect_same(got[1], want[1], "cross-lane read");
  expect_same(got[2], want[2], "independent lanes");
}

TEST(LlvmBackend, GuardedLoadIsNeverEvaluated) {
  // select(i < 0, x[i + 2^40], x[i]) and (i < 0 && x[i + 2^40] > 0): the far loads would fault.
  const Expr far = Expr(int64_t{1} << 40);
  const LoweredFunc f = elementwise("guard", {buf("out", F32, true), buf("x", F32)}, "out", [&](Expr i) {
    Expr picked = dsl::select(i < 0, ld(F32, "x", i + far), ld(F32, "x", i));
    return dsl::select((i < 0) && (ld(F32, "x", i + far) > f32c(0)), f32c(7), picked);
  });
  std::vector<Arg> args = {zeros(F32, 3), buffer_of(F32, std::vector<float>{1, 2, 3}), int_arg(3)};
  run_jit(f, args);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(args[0].at<float>(i), static_cast<float>(i + 1));
}

TEST(LlvmBackend, ScalarParamsOfEveryKind) {
  LoweredFunc f = elementwise(
      "scalars", {buf("out", F64, true), scalar("a", F32), scalar("b", F64), scalar("c", I32), scalar("d", kBool)},
      "out", [](Expr i) {
        return dsl::cast(F64, dsl::var("a", F32)) + dsl::var("b", F64) +
               dsl::cast(F64, dsl::var("c", I32) + dsl::cast(I32, i)) + dsl::cast(F64, dsl::var("d", kBool));
      });
  std::vector<Arg> args = {zeros(F64, 2), float_arg(0.1, F32), float_arg(0.1, F64),
                           int_arg(-7),   int_arg(1),          int_arg(2)};
  auto [got, want] = run_both(f, args);
  expect_same(got[0], want[0], "scalars");
  EXPECT_EQ(got[0].at<double>(1), static_cast<double>(0.1f) + 0.1 - 6 + 1);
}

TEST(LlvmBackend, SameObjectTwiceAndSameSymbolInTwoObjects) {
  auto make = [](double k) {
    return elementwise("same_name", {buf("out", F32, true)}, "out",
                       [&](Expr i) { return dsl::cast(F32, i) * f32c(k); });
  };
  const std::string obj2 = compile_to_object(make(2.0)), obj3 = compile_to_object(make(3.0));
  CpuKernelLoader loader;
  const CpuKernelFn a = loader.load(obj2, "same_name");
  const CpuKernelFn b = loader.load(obj2, "same_name");
  const CpuKernelFn c = CpuKernelLoader().load(obj3, "same_name");
  for (auto [fn, k] : std::vector<std::pair<CpuKernelFn, float> >{{a, 2.0f}, {b, 2.0f}, {c, 3.0f}}) {
    std::vector<Arg> args = {zeros(F32, 4), int_arg(4)};
    std::vector<ArgValue> v = abi(args);
    fn(v.data());
    EXPECT_EQ(args[0].at<float>(3), 3.0f * k);
  }
  EXPECT_NE(a, c);
  EXPECT_THROW(loader.load(obj2, "no_such_kernel"), std::runtime_error);
  EXPECT_THROW(loader.load("not an object file", "same_name"), std::runtime_error);
}

TEST(LlvmBackend, CompileAndLoadFromSeveralThreads) {
  std::vector<std::thread> threads;
  std::vector<float> results(4, 0.0f);
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&results, t] {
      const LoweredFunc f = elementwise("threaded", {buf("out", F32, true)}, "out",
                                        [&](Expr i) { return dsl::cast(F32, i) + f32c(static_cast<double>(t)); });
      std::vector<Arg> args = {zeros(F32, 3), int_arg(3)};
      std::vector<ArgValue> v = abi(args);
      CpuKernelLoader().load(compile_to_object(f), f.name)(v.data());
      results[t] = args[0].at<float>(2);
    });
  }
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(results[t], 2.0f + static_cast<float>(t));
}

TEST(LlvmBackend, CudaOnlyStatementsAreRejectedClearly) {
  auto expect_cuda_only = [](Stmt body) {
    LoweredFunc f;
    f.name = "gpu_stuff";
    f.params = {buf("out", F32, true)};
    f.body = std::move(body);
    try {
      compile_to_object(f);
      ADD_FAILURE() << "expected an error";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA-only statement in a CPU kernel"), std::string::npos) << e.what();
    }
  };
  const Stmt store = dsl::make_store("out", 0, f32c(1));
  expect_cuda_only(dsl::make_for("bx", 0, 4, ForKind::GPUBlock, store));
  expect_cuda_only(dsl::make_for("tx", 0, 4, ForKind::GPUThread, store));
  expect_cuda_only(dsl::make_block({store, dsl::make_barrier()}));
  expect_cuda_only(dsl::make_allocate("sh", F32, 4, dsl::MemoryScope::Shared, store));
  expect_cuda_only(dsl::make_allocate("acc", F32, 1, dsl::MemoryScope::Local,
                                      dsl::make_block_reduce(dsl::ReduceOp::Sum, "acc", F32)));
  // Unknown names are errors with context too.
  LoweredFunc f = elementwise("bad", {buf("out", F32, true)}, "out", [](Expr i) { return ld(F32, "nope", i); });
  EXPECT_THROW(emit_llvm_ir(f), std::runtime_error);
}

}  // namespace
}  // namespace flow::jit::llvm_backend

#endif  // FLOW_HAS_LLVM

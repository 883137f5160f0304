// Tests of the CUDA printer and the NVRTC compile path. No GPU is needed: every kernel is compiled
// with NVRTC for sm_90 and sm_80 and checked in its PTX (16-byte vector accesses, no local memory).
// The GPU loop nests are built by hand after docs/loop-nests.md.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "dsl/expr.h"
#include "dsl/ir_visitor.h"
#include "dsl/stmt.h"
#include "jit/cuda/cuda_compile.h"
#include "jit/cuda/cuda_printer.h"
#include "jit/cuda/embedded_helpers.h"
#include "runtime/nvrtc.h"
#include "simt/cuda_kernel_check.h"
#include "simt/simt_emulator.h"
#include "test_util.h"

#if __has_include("dsl/interpreter.h")
#include "dsl/interpreter.h"
#define FLOW_TEST_HAVE_INTERPRETER 1
#endif

namespace flow::jit::cuda {
namespace {

using namespace flow::dsl;  // NOLINT

const char* const kArchs[] = {"sm_90", "sm_80"};

Param buffer(const std::string& name, DType t, bool output = false) {
  return {name, ParamKind::Buffer, t, output};
}
Param scalar(const std::string& name, DType t = DType::Int64) {
  return {name, ParamKind::Scalar, t, false};
}

// ---- the GPU pointwise nest ----------------------------------------------------------------------

struct PointwiseSpec {
  std::string name;
  std::vector<std::pair<std::string, DType>> inputs;
  // One expression per output from the loaded inputs (in compute types: halves cast to float32).
  std::vector<std::pair<std::string, DType>> outputs;
  std::function<std::vector<Expr>(const std::vector<Expr>&)> body;
};

// grid = ((n + 256*W - 1) / (256*W)), block = (256): W elements per thread, W = 16 bytes of the
// widest buffer.
LoweredFunc gpu_pointwise(const PointwiseSpec& spec) {
  int widest = 1;
  for (const auto& p : spec.inputs) widest = std::max(widest, dtype_size(p.second));
  for (const auto& p : spec.outputs) widest = std::max(widest, dtype_size(p.second));
  const int64_t w = 16 / widest;
  const Expr n = var("n");
  const Expr base = var("base");
  const Expr v = var("v");

  // Each input is read into a Let first, as the schedulers bind them (scheduler/lowering.h): the
  // reads happen whatever the body selects.
  const auto lane_body = [&](const Expr& index) {
    std::vector<Expr> loads;
    std::vector<std::pair<std::string, Expr>> lets;
    for (const auto& [name, t] : spec.inputs) {
      const Expr l = load(t, name, index);
      const Expr value = is_storage_only(t) ? cast(compute_dtype(t), l) : l;
      lets.emplace_back(name + "_in", value);
      loads.push_back(var(name + "_in", value.type()));
    }
    const std::vector<Expr> values = spec.body(loads);
    std::vector<Stmt> stores;
    for (size_t i = 0; i < spec.outputs.size(); ++i) {
      stores.push_back(make_store(spec.outputs[i].first, index, cast(spec.outputs[i].second, values[i])));
    }
    Stmt body = make_block(stores);
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) body = make_let(it->first, it->second, body);
    return body;
  };

  const Stmt full = make_for("v", make_int(0), make_int(w), ForKind::Vectorized, lane_body(base + v));
  const Stmt tail =
      make_for("v", make_int(0), make_int(w), ForKind::Unrolled, make_if(base + v < n, lane_body(base + v)));
  const Expr blocks = (n + (256 * w - 1)) / (256 * w);
  const Stmt threads =
      make_for("tx", make_int(0), make_int(256), ForKind::GPUThread,
               make_let("base", (var("bx") * 256 + var("tx")) * w, make_if(base + w <= n, full, tail)));

  LoweredFunc f;
  f.name = spec.name;
  f.target = Target::CUDA;
  for (const auto& [name, t] : spec.outputs) f.params.push_back(buffer(name, t, true));
  for (const auto& [name, t] : spec.inputs) f.params.push_back(buffer(name, t));
  f.params.push_back(scalar("n"));
  f.body = make_for("bx", make_int(0), blocks, ForKind::GPUBlock, threads);
  f.grid[0] = blocks;
  f.block[0] = make_int(256);
  return f;
}

Expr f32(double v) {
  return make_float(v, DType::Float32);
}
Expr relu(const Expr& x) {
  return select(x > make_zero(x.type()), x, make_zero(x.type()));
}

LoweredFunc pointwise_f32_chain() {
  return gpu_pointwise({"pw_f32_chain",
                        {{"x", DType::Float32}, {"a", DType::Float32}, {"b", DType::Float32}},
                        {{"out", DType::Float32}},
                        [](const std::vector<Expr>& in) {
                          const Expr y = call(Intrinsic::Exp, {in[0]}) * in[1] - in[2];
                          return std::vector<Expr>{select(in[0] > f32(0.5), relu(y), in[0] * f32(-2.0))};
                        }});
}

LoweredFunc pointwise_half(DType t) {
  return gpu_pointwise(
      {std::string("pw_") + dtype_name(t), {{"x", t}, {"y", t}}, {{"out", t}}, [](const std::vector<Expr>& in) {
         return std::vector<Expr>{relu(in[0]) * f32(2.0) + call(Intrinsic::Tanh, {in[1]})};
       }});
}

// Every intrinsic and arithmetic node in float64 (and float32), plus NaN/inf constants.
LoweredFunc pointwise_all_float_ops(DType t) {
  return gpu_pointwise(
      {std::string("pw_ops_") + dtype_name(t),
       {{"x", t}, {"y", t}},
       {{"out", t}, {"flag", DType::Bool}},
       [t](const std::vector<Expr>& in) {
         const Expr x = in[0], y = in[1];
         const Expr one = make_one(t);
         Expr e = call(Intrinsic::Log, {call(Intrinsic::Abs, {x}) + one}) + call(Intrinsic::Sqrt, {y * y + one});
         e = e + call(Intrinsic::Rsqrt, {y * y + one}) * call(Intrinsic::Tanh, {x}) - call(Intrinsic::Erf, {y});
         e = e + call(Intrinsic::Pow, {call(Intrinsic::Abs, {y}), make_float(1.5, t)}) / (x * x + one);
         e = e + call(Intrinsic::Floor, {x}) * call(Intrinsic::Ceil, {y}) + (x % (y * y + one));
         e = min(e, max(x, y)) + -x + call(Intrinsic::Neg, {make_float(-1.0, t)});
         e = select(call(Intrinsic::IsNan, {x}), make_float(std::numeric_limits<double>::quiet_NaN(), t), e);
         e = select(x > make_float(1e30, t), make_float(std::numeric_limits<double>::infinity(), t), e);
         const Expr flag = !(x < y) && (x != y || call(Intrinsic::IsNan, {y}));
         return std::vector<Expr>{e, flag};
       }});
}

// C's math functions (tan ... erfc, atan2, hypot), each written to its own output.
const std::vector<Intrinsic> kCMath = {Intrinsic::Tan,   Intrinsic::Atan,  Intrinsic::Asin,  Intrinsic::Acos,
                                       Intrinsic::Sinh,  Intrinsic::Cosh,  Intrinsic::Asinh, Intrinsic::Acosh,
                                       Intrinsic::Atanh, Intrinsic::Log2,  Intrinsic::Log10, Intrinsic::Exp2,
                                       Intrinsic::Erfc,  Intrinsic::Atan2, Intrinsic::Hypot};
LoweredFunc pointwise_c_math(DType t, const std::vector<Intrinsic>& fns, const std::string& tag) {
  std::vector<std::pair<std::string, DType>> outs;
  for (const Intrinsic f : fns) outs.emplace_back(std::string("o_") + intrinsic_name(f), t);
  return gpu_pointwise({std::string("pw_cmath_") + tag + "_" + dtype_name(t),
                        {{"x", t}, {"y", t}},
                        outs,
                        [fns](const std::vector<Expr>& in) {
                          std::vector<Expr> r;
                          for (const Intrinsic f : fns)
                            r.push_back(intrinsic_arity(f) == 2 ? call(f, {in[0], in[1]}) : call(f, {in[0]}));
                          return r;
                        }});
}

// Integer and bool casts and integer arithmetic (truncating / and %).
LoweredFunc pointwise_casts() {
  return gpu_pointwise({"pw_casts",
                        {{"i", DType::Int32}, {"l", DType::Int64}, {"f", DType::Float32}},
                        {{"o_i64", DType::Int64},
                         {"o_i32", DType::Int32},
                         {"o_b", DType::Bool},
                         {"o_f32", DType::Float32},
                         {"o_h", DType::Float16},
                         {"o_h2", DType::Float16},
                         {"o_bf", DType::BFloat16}},
                        [](const std::vector<Expr>& in) {
                          const Expr i = in[0], l = in[1], f = in[2];
                          const Expr i64 = cast(DType::Int64, i) * 3 / 7 + l % 5 - min(l, cast(DType::Int64, i));
                          const Expr i32 = cast(DType::Int32, f) + max(i, 2) + call(Intrinsic::Abs, {i}) -
                                           cast(DType::Int32, cast(DType::Bool, l));
                          const Expr b = cast(DType::Bool, i) || (cast(DType::Bool, f) && l >= make_int(3000000000LL));
                          const Expr fl = cast(DType::Float32, l) + cast(DType::Float32, b) +
                                          cast(DType::Float32, cast(DType::Float64, f)) +
                                          cast(DType::Float32, cast(DType::BFloat16, f));
                          const Expr d = cast(DType::Float64, f) * make_float(2.0, DType::Float64);
                          return std::vector<Expr>{i64, i32, b, fl, fl, l, d};
                        }});
}

// A uint8 image chain as the compiler lowers it: loads widen to int32, each op's result wraps back
// to uint8 (x * 3 + 7, then // 5), and a float32 output scaled by 1/255.
LoweredFunc pointwise_uint8() {
  return gpu_pointwise({"pw_u8", {{"x", DType::UInt8}}, {{"o_u8", DType::UInt8}}, [](const std::vector<Expr>& in) {
                          const Expr wrapped = cast(DType::Int32, cast(DType::UInt8, in[0] * 3 + 7));
                          return std::vector<Expr>{wrapped / 5};
                        }});
}

// Every conversion into and out of the small integer types: sign and zero extension, wrapping
// narrowings, float -> small int through int32 (out of range included), small int -> half.
LoweredFunc pointwise_small_int_casts() {
  return gpu_pointwise({"pw_small_casts",
                        {{"u", DType::UInt8}, {"s", DType::Int8}, {"w", DType::Int16}, {"f", DType::Float32}},
                        {{"o_u8", DType::UInt8},
                         {"o_i8", DType::Int8},
                         {"o_i16", DType::Int16},
                         {"o_f32", DType::Float32},
                         {"o_h", DType::Float16},
                         {"o_l", DType::Int64}},
                        [](const std::vector<Expr>& in) {
                          const Expr u = in[0], s = in[1], w = in[2], f = in[3];
                          const Expr fu = cast(DType::Int32, cast(DType::UInt8, f * f32(100.0)));
                          const Expr sum = u * s + w - fu;
                          return std::vector<Expr>{sum,
                                                   cast(DType::Int32, cast(DType::Int8, f * f32(50.0))) - u,
                                                   cast(DType::Int32, cast(DType::Int16, sum * 300)),
                                                   cast(DType::Float32, u) / f32(255.0) + cast(DType::Float32, s),
                                                   cast(DType::Float32, w),
                                                   cast(DType::Int64, sum) * 100000};
                        }});
}

// ---- the GPU softmax nest (one block per row) --------------------------------------------------------

LoweredFunc gpu_softmax(int64_t threads = 256) {
  const Expr row = var("row"), tx = var("tx"), r = var("r"), c = var("c"), j = var("j");
  const Expr chunks = (r + (threads - 1)) / threads;
  const Expr xj = load(DType::Float32, "x", row * r + j);
  const auto over_row = [&](const Stmt& body) {
    return make_for("c", make_int(0), chunks, ForKind::Serial, make_let("j", c * threads + tx, make_if(j < r, body)));
  };
  const Expr acc0 = load(DType::Float32, "acc0", make_int(0));
  const Expr acc1 = load(DType::Float32, "acc1", make_int(0));
  const Expr m = var("m", DType::Float32), s = var("s", DType::Float32);
  const Stmt sum_part = make_allocate(
      "acc1", DType::Float32, 1, MemoryScope::Local,
      make_block({make_store("acc1", make_int(0), reduce_identity(ReduceOp::Sum, DType::Float32)),
                  over_row(make_store("acc1", make_int(0),
                                      reduce_combine(ReduceOp::Sum, acc1, call(Intrinsic::Exp, {xj - m})))),
                  make_block_reduce(ReduceOp::Sum, "acc1", DType::Float32),
                  make_let("s", acc1, over_row(make_store("out", row * r + j, call(Intrinsic::Exp, {xj - m}) / s)))}));
  const Stmt body = make_allocate(
      "acc0", DType::Float32, 1, MemoryScope::Local,
      make_block({make_store("acc0", make_int(0), reduce_identity(ReduceOp::Max, DType::Float32)),
                  over_row(make_store("acc0", make_int(0), reduce_combine(ReduceOp::Max, acc0, xj))),
                  make_block_reduce(ReduceOp::Max, "acc0", DType::Float32), make_let("m", acc0, sum_part)}));
  LoweredFunc f;
  f.name = "softmax";
  f.target = Target::CUDA;
  f.params = {buffer("out", DType::Float32, true), buffer("x", DType::Float32), scalar("rows"), scalar("r")};
  f.grid[0] = var("rows");
  f.block[0] = make_int(threads);
  f.body = make_for("row", make_int(0), var("rows"), ForKind::GPUBlock,
                    make_for("tx", make_int(0), make_int(threads), ForKind::GPUThread, body));
  return f;
}

// Integer and float64 block reductions, with a scalar float param (narrowed from double).
LoweredFunc gpu_reduce_mixed() {
  const Expr tx = var("tx"), row = var("row");
  const Expr idx = row * 128 + tx;
  const auto acc = [](const char* n, DType t) { return load(t, n, make_int(0)); };
  const Stmt body = make_allocate(
      "si", DType::Int64, 1, MemoryScope::Local,
      make_allocate(
          "md", DType::Float64, 1, MemoryScope::Local,
          make_allocate(
              "bb", DType::Bool, 1, MemoryScope::Local,
              make_block({make_store("si", make_int(0), load(DType::Int64, "l", idx)),
                          make_store("md", make_int(0), load(DType::Float64, "d", idx)),
                          make_store("bb", make_int(0), load(DType::Int64, "l", idx) > make_int(0)),
                          make_block_reduce(ReduceOp::Sum, "si", DType::Int64),
                          make_block_reduce(ReduceOp::Min, "md", DType::Float64),
                          make_block_reduce(ReduceOp::Sum, "bb", DType::Bool),
                          make_if(tx == make_int(0),
                                  make_block({make_store("osum", row, acc("si", DType::Int64)),
                                              make_store("omin", row,
                                                         acc("md", DType::Float64) *
                                                             cast(DType::Float64, var("scale", DType::Float32))),
                                              make_store("oany", row, acc("bb", DType::Bool))}))}))));
  LoweredFunc f;
  f.name = "reduce_mixed";
  f.target = Target::CUDA;
  f.params = {buffer("osum", DType::Int64, true), buffer("omin", DType::Float64, true),
              buffer("oany", DType::Bool, true),  buffer("l", DType::Int64),
              buffer("d", DType::Float64),        scalar("rows"),
              scalar("scale", DType::Float32)};
  f.grid[0] = var("rows");
  f.block[0] = make_int(128);
  f.body = make_for("row", make_int(0), var("rows"), ForKind::GPUBlock,
                    make_for("tx", make_int(0), make_int(128), ForKind::GPUThread, body));
  return f;
}

// Shared memory + barrier: out[i] = tile[tx] + tile[(tx + 1) % 256], tile staged through __shared__.
LoweredFunc gpu_shared_barrier() {
  const Expr tx = var("tx"), i = var("i"), n = var("n");
  const Expr blocks = (n + 255) / 256;
  const Stmt body = make_allocate(
      "tile", DType::Float32, 256, MemoryScope::Shared,
      make_let("i", var("bx") * 256 + tx,
               make_block({make_if(i < n, make_store("tile", tx, load(DType::Float32, "x", i)),
                                   make_store("tile", tx, f32(0.0))),
                           make_barrier(),
                           make_if(i < n, make_store("out", i,
                                                     load(DType::Float32, "tile", tx) +
                                                         load(DType::Float32, "tile", (tx + 1) % 256)))})));
  LoweredFunc f;
  f.name = "shared_neighbors";
  f.target = Target::CUDA;
  f.params = {buffer("out", DType::Float32, true), buffer("x", DType::Float32), scalar("n")};
  f.grid[0] = blocks;
  f.block[0] = make_int(256);
  f.body = make_for("bx", make_int(0), blocks, ForKind::GPUBlock,
                    make_for("tx", make_int(0), make_int(256), ForKind::GPUThread, body));
  return f;
}

// ---- helpers ---------------------------------------------------------------------------------------

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

bool contains_re(const std::string& s, const std::string& re) {
  return std::regex_search(s, std::regex(re));
}

// Compiles for every arch and checks what every kernel must satisfy; returns the sm_90 result.
CudaCompiled compile_all(const LoweredFunc& f) {
  CudaCompiled first;
  for (const char* arch : kArchs) {
    CudaCompiled c = cuda_compile(f, arch);
    EXPECT_FALSE(c.ptx.empty()) << arch;
    EXPECT_FALSE(c.cubin.empty()) << arch;
    EXPECT_FALSE(contains(c.ptx, ".local")) << f.name << " spills to local memory on " << arch << ":\n"
                                            << c.kernel.source;
    EXPECT_TRUE(contains(c.ptx, ".entry " + c.kernel.name + "(")) << arch;
    if (first.ptx.empty()) first = std::move(c);
  }
  return first;
}

// ---- tests -----------------------------------------------------------------------------------------

TEST(CudaCodegen, HelpersAreEmbedded) {
  const auto& helpers = embedded_helpers();
  const auto it =
      std::find_if(helpers.begin(), helpers.end(), [](const auto& h) { return h.first == "flow_helpers.cuh"; });
  ASSERT_NE(it, helpers.end());
  EXPECT_TRUE(contains(it->second, "block_reduce_sum"));
  EXPECT_TRUE(contains(it->second, "struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) Vec"));
}

TEST(CudaCodegen, PrintedSourceShape) {
  const LoweredFunc f = pointwise_f32_chain();
  const CudaSource src = print_cuda_source(f);
  EXPECT_EQ(src.name, "pw_f32_chain");
  EXPECT_TRUE(contains(src.source, "extern \"C\" __global__ void __launch_bounds__(256) pw_f32_chain("));
  EXPECT_TRUE(contains(src.source, "#include \"flow_helpers.cuh\""));
  EXPECT_TRUE(contains(src.source, "float* __restrict__ out"));
  EXPECT_TRUE(contains(src.source, "const float* __restrict__ x"));
  EXPECT_TRUE(contains(src.source, "const int64_t n"));
  EXPECT_TRUE(contains(src.source, "const int64_t bx = static_cast<int64_t>(blockIdx.x);"));
  EXPECT_TRUE(contains(src.source, "const int64_t tx = static_cast<int64_t>(threadIdx.x);"));
  EXPECT_TRUE(contains(src.source, "flow::load_vec<4>(x + base)"));
  EXPECT_TRUE(contains(src.source, "flow::store_vec<4>(out + base, "));
  EXPECT_TRUE(contains(src.source, "#pragma unroll"));
  EXPECT_TRUE(contains(src.source, "expf("));
  EXPECT_EQ(src.block_threads, 256);
  EXPECT_EQ(src.shared_bytes, 0);
  EXPECT_TRUE(equal(src.grid[0], f.grid[0]));
  EXPECT_TRUE(is_const_int(src.grid[1], 1));
  EXPECT_TRUE(equal(src.block[0], make_int(256)));
  EXPECT_EQ(print_cuda(f), src.source);
}

TEST(CudaCodegen, PointwiseFloat32VectorizesTo16ByteAccesses) {
  const CudaCompiled c = compile_all(pointwise_f32_chain());
  EXPECT_TRUE(contains_re(c.ptx, R"(ld\.global(\.nc)?\.v4\.f32)")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "st.global.v4.f32")) << c.ptx;
  // Three inputs: three 16-byte loads on the full-vector path.
  const std::regex vload(R"(ld\.global(\.nc)?\.v4\.f32)");
  EXPECT_EQ(std::distance(std::sregex_iterator(c.ptx.begin(), c.ptx.end(), vload), std::sregex_iterator()), 3);
}

TEST(CudaCodegen, PointwiseHalfTypes) {
  for (const DType t : {DType::Float16, DType::BFloat16}) {
    const CudaCompiled c = compile_all(pointwise_half(t));
    EXPECT_TRUE(contains(c.kernel.source, "const flow::Vec<" + std::string(cuda_type_name(t)) +
                                              ", 8> x_vec = flow::load_vec<8>(x + base);"));
    EXPECT_TRUE(contains_re(c.ptx, R"(ld\.global(\.nc)?\.v4\.(u32|b32))")) << dtype_name(t) << "\n" << c.ptx;
    EXPECT_TRUE(contains_re(c.ptx, R"(st\.global\.v4\.(u32|b32))")) << dtype_name(t);
    EXPECT_TRUE(contains(c.ptx, t == DType::Float16 ? "cvt.rn.f16.f32" : "cvt.rn.bf16.f32")) << dtype_name(t);
  }
}

TEST(CudaCodegen, PointwiseUInt8VectorizesTo16ByteAccesses) {
  const CudaCompiled c = compile_all(pointwise_uint8());
  EXPECT_TRUE(contains(c.kernel.source, "const flow::Vec<uint8_t, 16> x_vec = flow::load_vec<16>(x + base);"))
      << c.kernel.source;
  EXPECT_TRUE(contains_re(c.ptx, R"(ld\.global(\.nc)?\.v4\.(u32|b32))")) << c.ptx;
  EXPECT_TRUE(contains_re(c.ptx, R"(st\.global\.v4\.(u32|b32))")) << c.ptx;
}

TEST(CudaCodegen, SmallIntegerCasts) {
  const CudaCompiled c = compile_all(pointwise_small_int_casts());
  EXPECT_TRUE(contains(c.kernel.source, "static_cast<uint8_t>(flow::float_to_int<int32_t>(")) << c.kernel.source;
  EXPECT_TRUE(contains(c.kernel.source, "static_cast<int8_t>(flow::float_to_int<int32_t>("));
  EXPECT_TRUE(contains(c.kernel.source, "static_cast<int16_t>("));
}

TEST(CudaCodegen, AllFloatOps) {
  const CudaCompiled c64 = compile_all(pointwise_all_float_ops(DType::Float64));
  EXPECT_TRUE(contains_re(c64.ptx, R"(ld\.global(\.nc)?\.v2\.f64)"));
  EXPECT_TRUE(contains(c64.ptx, "st.global.v2.f64"));
  // float64 intrinsics are the double versions, not the float ones.
  EXPECT_TRUE(contains(c64.kernel.source, "exp(") || contains(c64.kernel.source, "log("));
  EXPECT_FALSE(contains(c64.kernel.source, "logf("));
  EXPECT_TRUE(contains(c64.kernel.source, "fmod("));
  const CudaCompiled c32 = compile_all(pointwise_all_float_ops(DType::Float32));
  EXPECT_TRUE(contains_re(c32.ptx, R"(ld\.global(\.nc)?\.v4\.f32)"));
  for (const char* fn : {"logf(", "sqrtf(", "rsqrtf(", "tanhf(", "erff(", "powf(", "floorf(", "ceilf(", "fmodf(",
                         "isnan(", "flow::min<float>(", "flow::max<float>(", "flow::abs<float>("}) {
    EXPECT_TRUE(contains(c32.kernel.source, fn)) << fn;
  }
}

TEST(CudaCodegen, IntegerAndBoolCasts) {
  const CudaCompiled c = compile_all(pointwise_casts());
  EXPECT_TRUE(contains(c.kernel.source, "static_cast<int64_t>(i_in)")) << c.kernel.source;
  EXPECT_TRUE(contains(c.kernel.source, "flow::float_to_int<int32_t>(f_in)"));
  EXPECT_TRUE(contains(c.kernel.source, "flow::float_to_bfloat16(f_in)"));
  EXPECT_TRUE(contains(c.kernel.source, "flow::float_to_half("));
  EXPECT_TRUE(contains(c.kernel.source, "flow::double_to_half(static_cast<double>(l_in))"));
  EXPECT_TRUE(contains(c.kernel.source, "flow::double_to_bfloat16(static_cast<double>(f_in) * 2.0)"));
  EXPECT_TRUE(contains(c.kernel.source, "int64_t(3000000000LL)"));
  // Widest buffer is 8 bytes: two lanes, 16-byte int64 accesses.
  EXPECT_TRUE(contains_re(c.ptx, R"(ld\.global(\.nc)?\.v2\.(u64|b64|s64))")) << c.ptx;
  EXPECT_TRUE(contains_re(c.ptx, R"(st\.global\.v2\.(u64|b64|s64))"));
}

TEST(CudaCodegen, SoftmaxBlockReduce) {
  const CudaCompiled c = compile_all(gpu_softmax());
  EXPECT_TRUE(contains(c.kernel.source, "flow::block_reduce_max<float>(acc0[0], flow_reduce_float32)"));
  EXPECT_TRUE(contains(c.kernel.source, "flow::block_reduce_sum<float>(acc1[0], flow_reduce_float32)"));
  EXPECT_EQ(c.kernel.shared_bytes, 32 * 4);
  EXPECT_TRUE(contains(c.ptx, "shfl.sync.bfly")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "bar.sync"));
  EXPECT_TRUE(contains(c.ptx, ".shared"));
}

TEST(CudaCodegen, MixedReductionsAndNarrowedScalars) {
  const CudaCompiled c = compile_all(gpu_reduce_mixed());
  EXPECT_TRUE(contains(c.kernel.source, "const double scale_arg"));
  EXPECT_TRUE(contains(c.kernel.source, "const float scale = static_cast<float>(scale_arg);"));
  EXPECT_TRUE(contains(c.kernel.source, "flow::block_reduce_sum<int64_t>("));
  EXPECT_TRUE(contains(c.kernel.source, "flow::block_reduce_min<double>("));
  EXPECT_TRUE(contains(c.kernel.source, "flow::block_reduce_max<int32_t>("));
  EXPECT_EQ(c.kernel.shared_bytes, 32 * 8);  // scratch sized by the widest reduced type
}

TEST(CudaCodegen, SharedMemoryAndBarrier) {
  const CudaCompiled c = compile_all(gpu_shared_barrier());
  EXPECT_TRUE(contains(c.kernel.source, "__shared__ float tile[256];"));
  EXPECT_TRUE(contains(c.kernel.source, "__syncthreads();"));
  EXPECT_EQ(c.kernel.shared_bytes, 256 * 4);
  EXPECT_TRUE(contains(c.ptx, "bar.sync"));
  EXPECT_TRUE(contains(c.ptx, "st.shared.f32"));
  EXPECT_TRUE(contains(c.ptx, "ld.shared.f32"));
}

TEST(CudaCodegen, ScalarFallbackInsideVectorizedLoop) {
  // out[base + v] = x[2 * (base + v)]: the load's lane coefficient is 2 -> scalar loads, vector store.
  LoweredFunc f =
      gpu_pointwise({"pw_strided", {{"x", DType::Float32}}, {{"out", DType::Float32}}, [](const std::vector<Expr>& in) {
                       return std::vector<Expr>{in[0]};
                     }});
  const Expr base = var("base"), v = var("v"), tx = var("tx");
  const Stmt vec = make_for("v", make_int(0), make_int(4), ForKind::Vectorized,
                            make_store("out", base + v, load(DType::Float32, "x", (base + v) * 2)));
  f.body = make_for("bx", make_int(0), f.grid[0], ForKind::GPUBlock,
                    make_for("tx", make_int(0), make_int(256), ForKind::GPUThread,
                             make_let("base", (var("bx") * 256 + tx) * 4, make_if(base + 4 <= var("n"), vec))));
  const CudaCompiled c = compile_all(f);
  EXPECT_TRUE(contains(c.kernel.source, "x[(base + v) * 2]")) << c.kernel.source;
  EXPECT_TRUE(contains(c.ptx, "st.global.v4.f32"));
  EXPECT_FALSE(contains_re(c.ptx, R"(ld\.global(\.nc)?\.v4)"));
}

// cat's shape: out[i] = i < na ? a[i] : b[i - na]. A vector load of both sides would read b up to
// na elements before its start (and a past its end): the C ?: reads only the chosen side, so the
// loads stay scalar; the store stays a vector. A select arm whose load the body also performs
// unconditionally (c[i] + (c[i] > 0 ? c[i] : 0)) keeps its vector load.
TEST(CudaCodegen, LoadsUnderASelectArmStayScalar) {
  const Expr base = var("base"), v = var("v"), tx = var("tx"), n = var("n"), split = var("na");
  const auto lane = [&](const Expr& i) {
    const Expr picked = select(i < split, load(DType::Float32, "a", i), load(DType::Float32, "b", i - split));
    const Expr c = load(DType::Float32, "c", i);
    const Expr kept = c + select(c > f32(0), load(DType::Float32, "c", i), f32(0));
    return make_block({make_store("out", i, picked), make_store("out2", i, kept)});
  };
  const Stmt full = make_for("v", make_int(0), make_int(4), ForKind::Vectorized, lane(base + v));
  const Stmt tail = make_for("v", make_int(0), make_int(4), ForKind::Unrolled, make_if(base + v < n, lane(base + v)));
  LoweredFunc f;
  f.name = "cat_like";
  f.target = Target::CUDA;
  f.params = {buffer("out", DType::Float32, true),
              buffer("out2", DType::Float32, true),
              buffer("a", DType::Float32),
              buffer("b", DType::Float32),
              buffer("c", DType::Float32),
              scalar("n"),
              scalar("na")};
  const Expr blocks = (n + 1023) / 1024;
  f.body = make_for("bx", make_int(0), blocks, ForKind::GPUBlock,
                    make_for("tx", make_int(0), make_int(256), ForKind::GPUThread,
                             make_let("base", (var("bx") * 256 + tx) * 4, make_if(base + 4 <= n, full, tail))));
  f.grid[0] = blocks;
  f.block[0] = make_int(256);
  const CudaCompiled c = compile_all(f);
  EXPECT_FALSE(contains(c.kernel.source, "load_vec<4>(a")) << c.kernel.source;
  EXPECT_FALSE(contains(c.kernel.source, "load_vec<4>(b")) << c.kernel.source;
  EXPECT_TRUE(contains(c.kernel.source, "load_vec<4>(c")) << c.kernel.source;
  EXPECT_TRUE(contains(c.kernel.source, "store_vec<4>(out + ")) << c.kernel.source;
  // On the emulator with a and b exactly as long as their parts: the fenced run of the check
  // (simt/cuda_kernel_check.h) faults on a read outside them.
  const int64_t na = 1000, nb = 1003, total = na + nb;
  auto rng = test::rng(79);
  std::vector<std::vector<unsigned char>> bytes = {
      test::random_bytes(DType::Float32, total, rng), test::random_bytes(DType::Float32, total, rng),
      test::random_bytes(DType::Float32, na, rng), test::random_bytes(DType::Float32, nb, rng),
      test::random_bytes(DType::Float32, total, rng)};
  std::vector<ArgValue> args(f.params.size());
  std::vector<test::BufferSpan> spans(f.params.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    args[i].ptr = bytes[i].data();
    spans[i] = {bytes[i].data(), bytes[i].size() - 1};  // (random_bytes adds a spare byte)
  }
  args[5].i64 = total;
  args[6].i64 = na;
  test::expect_cuda_text_matches_interpreter(f, args, spans);
}

TEST(CudaCodegen, ParallelLoopIsRejected) {
  LoweredFunc f = pointwise_f32_chain();
  f.body = make_for("t", make_int(0), var("n"), ForKind::Parallel,
                    make_store("out", var("t"), load(DType::Float32, "x", var("t"))));
  try {
    cuda_compile(f, "sm_90");
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "Parallel loop 't'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "pw_f32_chain")) << e.what();
  }
}

TEST(CudaCodegen, MalformedKernelsAreRejected) {
  LoweredFunc cpu = pointwise_f32_chain();
  cpu.target = Target::CPU;
  EXPECT_THROW(print_cuda(cpu), std::invalid_argument);

  LoweredFunc wrong_extent = gpu_softmax();
  wrong_extent.block[0] = make_int(128);  // the GPUThread loop runs to 256
  EXPECT_THROW(print_cuda(wrong_extent), std::invalid_argument);

  LoweredFunc store_to_input = gpu_shared_barrier();
  store_to_input.params[0].is_output = false;
  EXPECT_THROW(print_cuda(store_to_input), std::invalid_argument);

  LoweredFunc barrier_in_loop = gpu_softmax();
  barrier_in_loop.body = make_for("row", make_int(0), var("rows"), ForKind::GPUBlock,
                                  make_for("tx", make_int(0), make_int(256), ForKind::GPUThread,
                                           make_for("c", make_int(0), var("r"), ForKind::Serial, make_barrier())));
  EXPECT_THROW(print_cuda(barrier_in_loop), std::invalid_argument);
}

TEST(CudaCodegen, CompileErrorCarriesLogAndSavedSource) {
  const std::string broken =
      "#include \"flow_helpers.cuh\"\nextern \"C\" __global__ void broken(float* o) { o[0] = ; }\n";
  try {
    cuda_compile_source("broken", broken, "sm_90");
    FAIL() << "expected an NVRTC error";
  } catch (const runtime::NvrtcError& e) {
    EXPECT_FALSE(e.log().empty());
    EXPECT_TRUE(contains(e.log(), "expected an expression")) << e.log();
    EXPECT_TRUE(contains(e.what(), e.log().substr(0, 40))) << e.what();
    EXPECT_TRUE(contains(e.what(), "broken"));
    ASSERT_FALSE(e.source_path().empty());
    EXPECT_TRUE(contains(e.what(), e.source_path()));
    EXPECT_TRUE(std::filesystem::exists(e.source_path()));
    std::filesystem::remove(e.source_path());
  }
}

TEST(CudaCodegen, CompilerIdentity) {
  const std::string id = cuda_compiler_id();
  EXPECT_EQ(id.rfind("nvrtc-", 0), 0u) << id;
  EXPECT_TRUE(contains(id, "-std=c++17"));
  EXPECT_FALSE(contains(id, "fast_math"));
  EXPECT_TRUE(contains_re(id, "helpers-xxh3=[0-9a-f]{32}$")) << id;
  EXPECT_EQ(id, cuda_compiler_id());
}

TEST(CudaCodegen, PtxOnlyForVirtualArch) {
  const CudaCompiled c = cuda_compile(gpu_softmax(), "compute_90");
  EXPECT_FALSE(c.ptx.empty());
  EXPECT_TRUE(c.cubin.empty());
}

#ifdef FLOW_TEST_HAVE_INTERPRETER
// ---- the printed text, run: the SIMT emulator against the loop interpreter --------------------------

// Runs `f` with random buffers (numel_of(param) elements each) and the given scalars through
// test::expect_cuda_text_matches_interpreter.
void run_printed(const LoweredFunc& f, const std::function<int64_t(const Param&)>& numel_of,
                 const std::map<std::string, ArgValue>& scalars, std::mt19937_64& rng, const std::string& context,
                 bool specials = true) {
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<ArgValue> args(f.params.size());
  std::vector<test::BufferSpan> spans(f.params.size());
  buffers.reserve(f.params.size());
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Param& p = f.params[i];
    if (p.kind == ParamKind::Scalar) {
      args[i] = scalars.at(p.name);
      continue;
    }
    buffers.push_back(test::random_bytes(p.dtype, numel_of(p), rng, specials));
    args[i].ptr = buffers.back().data();
    spans[i] = {buffers.back().data(), buffers.back().size()};
  }
  test::expect_cuda_text_matches_interpreter(f, args, spans, context);
}

ArgValue i64_arg(int64_t v) {
  ArgValue a;
  a.i64 = v;
  return a;
}

// The printed pointwise kernels (vector and tail paths, half conversions, every float intrinsic,
// integer casts and division) over sizes that end mid-vector, mid-block and on a block boundary.
TEST(CudaCodegen, PrintedPointwiseKernelsRunOnTheSimtEmulator) {
  auto rng = test::rng(71);
  const std::vector<LoweredFunc> kernels = {pointwise_f32_chain(),
                                            pointwise_half(DType::Float16),
                                            pointwise_half(DType::BFloat16),
                                            pointwise_all_float_ops(DType::Float32),
                                            pointwise_all_float_ops(DType::Float64),
                                            pointwise_casts(),
                                            pointwise_uint8(),
                                            pointwise_small_int_casts()};
  for (const LoweredFunc& f : kernels) {
    for (const int64_t n : {1, 3, 8, 255, 2048, 4096 + 13}) {
      run_printed(
          f, [n](const Param&) { return n; }, {{"n", i64_arg(n)}}, rng, "n " + std::to_string(n));
    }
  }
}

// C's math functions print as CUDA's (tanf / tan, ...) and their printed text on the SIMT emulator
// (the host's libm) matches the interpreter. All but tan compile for every arch without local
// memory; tan's PTX has a local array: CUDA's tanf/tan reduce huge arguments (|x| > ~1e5) with a
// Payne-Hanek table walk over a small local buffer (as sinf/cosf do), not a register spill.
TEST(CudaCodegen, CMathFunctions) {
  auto rng = test::rng(73);
  std::vector<Intrinsic> no_tan;
  for (const Intrinsic f : kCMath)
    if (f != Intrinsic::Tan) no_tan.push_back(f);
  for (const DType t : {DType::Float32, DType::Float64}) {
    const LoweredFunc f = pointwise_c_math(t, no_tan, "no_tan");
    const CudaCompiled c = compile_all(f);
    for (const Intrinsic fn : no_tan) {
      const std::string name = std::string(intrinsic_name(fn)) + (t == DType::Float32 ? "f(" : "(");
      EXPECT_TRUE(contains(c.kernel.source, name)) << name << "\n" << c.kernel.source;
    }
    const LoweredFunc tan_f = pointwise_c_math(t, {Intrinsic::Tan}, "tan");
    const CudaCompiled ct = cuda_compile(tan_f, "sm_90");
    EXPECT_FALSE(ct.cubin.empty());
    EXPECT_TRUE(contains(ct.kernel.source, t == DType::Float32 ? "tanf(" : "tan("));
    for (const int64_t n : {1, 13, 1000}) {
      for (const LoweredFunc* k : {&f, &tan_f}) {
        run_printed(
            *k, [n](const Param&) { return n; }, {{"n", i64_arg(n)}}, rng,
            std::string(dtype_name(t)) + " n " + std::to_string(n));
      }
    }
  }
}

// The bitwise functions (and, or, xor, and the shifts with counts masked into [0, bits) as the ops
// bring them there): NVRTC for every arch, and the text on the SIMT emulator against the interpreter
// (random bits, extremes included).
TEST(CudaCodegen, BitwiseFunctions) {
  auto rng = test::rng(74);
  for (const DType t : {DType::Int32, DType::Int64}) {
    const int64_t bits = t == DType::Int32 ? 32 : 64;
    const LoweredFunc f = gpu_pointwise(
        {std::string("pw_bits_") + dtype_name(t),
         {{"x", t}, {"y", t}},
         {{"o_and", t}, {"o_or", t}, {"o_xor", t}, {"o_shl", t}, {"o_shr", t}},
         [t, bits](const std::vector<Expr>& in) {
           // the count as the ops write it (a select): the printer must parenthesize operands
           const Expr masked = call(Intrinsic::BitAnd, {in[1], make_int(bits - 1, t)});
           const Expr count = select(in[1] < make_int(0, t) || in[1] >= make_int(bits, t), masked, in[1]);
           return std::vector<Expr>{call(Intrinsic::BitAnd, {in[0], in[1]}), call(Intrinsic::BitOr, {in[0], in[1]}),
                                    call(Intrinsic::BitXor, {in[0], in[1]}), call(Intrinsic::Shl, {in[0], count}),
                                    call(Intrinsic::Shr, {in[0], count})};
         }});
    const CudaCompiled c = compile_all(f);
    for (const char* op : {" & ", " | ", " ^ ", " >> ", "<< "}) EXPECT_TRUE(contains(c.kernel.source, op)) << op;
    for (const int64_t n : {1, 13, 1000}) {
      run_printed(
          f, [n](const Param&) { return n; }, {{"n", i64_arg(n)}}, rng,
          std::string(dtype_name(t)) + " n " + std::to_string(n));
    }
  }
}

// Integer Pow (torch's powi, wrapping): flow::ipow for every arch, and the text on the SIMT emulator
// against the interpreter over random bases and exponents (negative and past the bit width), and
// small exponents where squarings stop early in some lanes.
TEST(CudaCodegen, IntegerPowWraps) {
  auto rng = test::rng(76);
  for (const DType t : {DType::Int32, DType::Int64}) {
    const LoweredFunc f = gpu_pointwise(
        {std::string("pw_ipow_") + dtype_name(t),
         {{"x", t}, {"y", t}},
         {{"o_big", t}, {"o_small", t}},
         [t](const std::vector<Expr>& in) {
           const Expr small = call(Intrinsic::BitAnd, {in[1], make_int(15, t)});
           return std::vector<Expr>{call(Intrinsic::Pow, {in[0], in[1]}), call(Intrinsic::Pow, {in[0], small})};
         }});
    const CudaCompiled c = compile_all(f);
    EXPECT_TRUE(contains(c.kernel.source, "flow::ipow(")) << c.kernel.source;
    for (const int64_t n : {1, 13, 1000}) {
      run_printed(
          f, [n](const Param&) { return n; }, {{"n", i64_arg(n)}}, rng,
          std::string(dtype_name(t)) + " n " + std::to_string(n));
    }
  }
}

// Reinterpret between types of one size: CUDA's bit-cast intrinsics, the half structs' bits and
// the byte conversion; NVRTC for every arch, and the text on the SIMT emulator against the
// interpreter, in vector and tail paths. Halves come in as float32 and are rounded back first, as
// the bitcast op does.
TEST(CudaCodegen, ReinterpretReadsTheBits) {
  auto rng = test::rng(75);
  const LoweredFunc f = gpu_pointwise(
      {"pw_reinterpret",
       {{"f", DType::Float32},
        {"d", DType::Float64},
        {"h", DType::Float16},
        {"b", DType::BFloat16},
        {"u", DType::UInt8},
        {"i", DType::Int32},
        {"s", DType::Int16}},
       {{"o_f", DType::Int32},
        {"o_d", DType::Int64},
        {"o_h", DType::Int16},
        {"o_b", DType::Float16},
        {"o_u", DType::Int8},
        {"o_i", DType::Float32},
        {"o_s", DType::BFloat16}},
       [](const std::vector<Expr>& in) {
         return std::vector<Expr>{
             reinterpret(DType::Int32, in[0]), reinterpret(DType::Int64, in[1]),
             reinterpret(DType::Int16, cast(DType::Float16, in[2])),
             reinterpret(DType::Float16, cast(DType::BFloat16, in[3])),
             reinterpret(DType::Int8, cast(DType::UInt8, in[4])), reinterpret(DType::Float32, in[5]),
             // exponent below all ones: no signaling NaN, which the interpreter
             // (holding doubles) would quiet
             reinterpret(DType::BFloat16,
                         cast(DType::Int16, call(Intrinsic::BitAnd, {in[6], make_int(0x7F7F, DType::Int32)})))};
       }});
  const CudaCompiled c = compile_all(f);
  for (const char* s : {"__float_as_int(", "__double_as_longlong(", "__int_as_float(", ".bits", "flow::half{"})
    EXPECT_TRUE(contains(c.kernel.source, s)) << s;
  for (const int64_t n : {1, 13, 1000}) {
    run_printed(
        f, [n](const Param&) { return n; }, {{"n", i64_arg(n)}}, rng, "n " + std::to_string(n));
  }
}

// Block reductions through warp shuffles and shared memory: softmax rows shorter than, equal to and
// longer than the block, with a block that is not a multiple of the warp size (96 threads); integer,
// float64 and bool reductions; a shared tile behind a barrier; scalar loads beside a vector store.
TEST(CudaCodegen, PrintedReductionsAndSharedMemoryRunOnTheSimtEmulator) {
  auto rng = test::rng(72);
  for (const int64_t threads : {256, 96, 32, 1}) {
    for (const int64_t r : {1, 37, 256, 1000}) {
      const int64_t rows = 3;
      for (const bool specials : {false, true}) {
        run_printed(
            gpu_softmax(threads), [&](const Param&) { return rows * r; }, {{"rows", i64_arg(rows)}, {"r", i64_arg(r)}},
            rng, "threads " + std::to_string(threads) + ", r " + std::to_string(r), specials);
      }
    }
  }
  ArgValue scale;
  scale.f64 = 0.75;
  for (const bool specials : {false, true}) {
    run_printed(
        gpu_reduce_mixed(), [](const Param& p) { return p.is_output ? 5 : 5 * 128; },
        {{"rows", i64_arg(5)}, {"scale", scale}}, rng, "5 rows", specials);
  }
  for (const int64_t n : {1, 256, 700})
    run_printed(
        gpu_shared_barrier(), [n](const Param&) { return n; }, {{"n", i64_arg(n)}}, rng, "n " + std::to_string(n));
  LoweredFunc strided =
      gpu_pointwise({"pw_strided", {{"x", DType::Float32}}, {{"out", DType::Float32}}, [](const std::vector<Expr>& in) {
                       return std::vector<Expr>{in[0]};
                     }});
  const Expr base = var("base"), v = var("v"), tx = var("tx");
  strided.body = make_for(
      "bx", make_int(0), strided.grid[0], ForKind::GPUBlock,
      make_for("tx", make_int(0), make_int(256), ForKind::GPUThread,
               make_let("base", (var("bx") * 256 + tx) * 4,
                        make_if(base + 4 <= var("n"),
                                make_for("v", make_int(0), make_int(4), ForKind::Vectorized,
                                         make_store("out", base + v, load(DType::Float32, "x", (base + v) * 2)))))));
  run_printed(
      strided, [](const Param& p) { return p.is_output ? 1024 : 2048; }, {{"n", i64_arg(1024)}}, rng, "n 1024");
}

// The emulator itself must catch what a device faults on: a vector access off its alignment.
// A buffer base at an element offset (a view) is not aligned for 16-byte vectors: the printed
// kernel tests that at run time and runs those lanes as scalars, with the same values.
TEST(CudaCodegen, MisalignedBaseRunsTheScalarLanes) {
  const LoweredFunc f = pointwise_f32_chain();
  const std::string source = jit::cuda::print_cuda(f);
  EXPECT_TRUE(contains(source, "flow::vec_aligned<4>(")) << source;
  auto rng = test::rng(73);
  const int64_t n = 1024;
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<ArgValue> args(f.params.size());
  std::vector<test::BufferSpan> spans(f.params.size());
  for (size_t i = 0; i < f.params.size(); ++i) {
    if (f.params[i].kind == ParamKind::Scalar) {
      args[i].i64 = n;
      continue;
    }
    buffers.push_back(test::random_bytes(DType::Float32, n + 1, rng));
    // Input "a" starts one float into its allocation: 4-byte aligned, not 16.
    args[i].ptr = buffers.back().data() + (f.params[i].name == "a" ? 4 : 0);
    spans[i] = {buffers.back().data(), buffers.back().size()};
  }
  testing::TestPartResultArray failures;
  {
    testing::ScopedFakeTestPartResultReporter reporter(testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS,
                                                       &failures);
    test::expect_cuda_text_matches_interpreter(f, args, spans);
  }
  EXPECT_EQ(failures.size(), 0) << (failures.size() ? failures.GetTestPartResult(0).message() : "");
}

// The emulator itself faults on a vector access at a misaligned address (as a device does).
TEST(CudaCodegen, SimtEmulatorReportsAMisalignedVectorAccess) {
  const std::string source = R"(#include "flow_helpers.cuh"
extern "C" __global__ void copy4(float* out, const float* in) {
  flow::store_vec<4>(out, flow::load_vec<4>(in));
})";
  const auto m = test::simt::module_for(source, {"copy4"}, jit::cuda::embedded_helpers());
  alignas(16) float buf[12] = {};
  float* out = buf;
  const float* in = buf + 5;  // 4-byte aligned, not 16
  void* params[] = {&out, &in};
  try {
    m->launch("copy4", {1, 1, 1}, {1, 1, 1}, params);
    ADD_FAILURE() << "no fault reported";
  } catch (const std::exception& e) {
    EXPECT_TRUE(contains(e.what(), "misaligned vector access")) << e.what();
  }
}

// The interpreter runs the GPU softmax nest serially with SIMT semantics: this checks the schedule
// (the printer itself is checked by NVRTC and the PTX above).
TEST(CudaCodegen, SoftmaxNestInterpretedMatchesReference) {
  auto gen = test::rng(7);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (const int64_t threads : {256, 96}) {
    for (const int64_t r : {1, 37, 256, 1000}) {
      const int64_t rows = 3;
      std::vector<float> x(rows * r), out(rows * r, -1.f);
      for (float& e : x) e = dist(gen);
      const LoweredFunc f = gpu_softmax(threads);
      std::vector<ArgValue> args(4);
      args[0].ptr = out.data();
      args[1].ptr = x.data();
      args[2].i64 = rows;
      args[3].i64 = r;
      interpret(f, args);
      for (int64_t row = 0; row < rows; ++row) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < r; ++j) m = std::max<double>(m, x[row * r + j]);
        for (int64_t j = 0; j < r; ++j) s += std::exp(x[row * r + j] - m);
        for (int64_t j = 0; j < r; ++j) {
          const double want = std::exp(x[row * r + j] - m) / s;
          ASSERT_NEAR(out[row * r + j], want, 1e-6 + 1e-5 * want) << "threads " << threads << " r " << r << " j " << j;
        }
      }
    }
  }
}
#endif

}  // namespace
}  // namespace flow::jit::cuda

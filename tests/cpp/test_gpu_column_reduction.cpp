// The GPU column form of reductions over strided rows (scheduler/column_reduction.h): a block of
// block_x adjacent rows, each split over block_y threads. Its loop nests, run by the loop
// interpreter, equal the graph interpreter's results; its printed CUDA equals the loop nest on the
// SIMT emulator (with outputs poisoned, so a row left unwritten fails); NVRTC compiles it for sm_90
// without local memory and with coalesced loads. The heuristics choose it only for many rows with a
// warp's worth of them adjacent, and FLOW_GPU_COLUMN_REDUCTION=0 keeps the row form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "dsl/graph.h"
#include "dsl/graph_interpreter.h"
#include "dsl/interpreter.h"
#include "jit/cuda/cuda_compile.h"
#include "jit/layouts.h"
#include "scheduler/column_reduction.h"
#include "scheduler/fusion.h"
#include "scheduler/scheduler.h"
#include "simt/cuda_kernel_check.h"
#include "test_util.h"

namespace flow {
namespace {

using dsl::DType;
using dsl::Shape;

// `op` over `dims` (H and W by default) of an NCHW input stored channels-last (memory [N, H, W, C],
// each image `pad` pixels longer than H * W, so N and H do not merge), times 2 for a floating sum (a
// row op after the reduction): one group, and the input's layout.
struct ColumnGraph {
  dsl::Graph g;
  sched::FusionPlan plan;
  sched::GroupLayouts layouts;
  std::vector<int64_t> strides;  // of the logical [N, C, H, W] input

  sched::KernelInstance instance() const { return sched::specialize(g, plan.groups.at(0), layouts, true); }
};

ColumnGraph column_graph(const Shape& nhwc, const std::string& op, DType t, const std::vector<int64_t>& dims = {2, 3},
                         int64_t pad = 0) {
  ColumnGraph c;
  const int64_t n = nhwc[0], h = nhwc[1], w = nhwc[2], ch = nhwc[3];
  const int x = c.g.add_input({{n, ch, h, w}, t}, "x");
  int r = c.g.add(op, {x}, {{"dims", dims}, {"keepdim", true}});
  if (op == "sum" && dsl::is_floating(t)) r = c.g.add("mul", {r, c.g.add_constant(2.0, DType::Float64, true)});
  c.g.mark_output(r);
  c.plan = sched::fuse(c.g);
  c.strides = {(h * w + pad) * ch, 1, w * ch, ch};
  c.layouts[x] = c.strides;
  return c;
}

// Writes `v` (rounded to t) into element i of memory holding t.
void write_value(DType t, void* base, int64_t i, double v) {
  switch (t) {
    case DType::Float32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case DType::Float16:
      static_cast<uint16_t*>(base)[i] = dsl::float_to_half_bits(static_cast<float>(v));
      return;
    case DType::BFloat16:
      static_cast<uint16_t*>(base)[i] = dsl::float_to_bf16_bits(static_cast<float>(v));
      return;
    case DType::Int32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(std::lround(v * 1000));
      return;
    case DType::Bool:
      static_cast<uint8_t*>(base)[i] = v > 4 ? 1 : 0;  // 2% true: `any` of 15 is true for ~30% of rows
      return;
    default:
      FAIL() << "no writer for " << dsl::dtype_name(t);
  }
}

double read_value(DType t, const void* base, int64_t i) {
  const dsl::Scalar s = dsl::read_element(t, base, i);
  return dsl::is_floating(t) ? s.f : static_cast<double>(s.i);
}

std::vector<double> random_values(int64_t n, std::mt19937_64& rng, bool with_nan) {
  std::normal_distribution<double> d(0.0, 2.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& e : v) e = d(rng);
  if (with_nan && n > 0) v[static_cast<size_t>(n / 2)] = NAN;
  return v;
}

// Schedules the group for CUDA with `p` (or the heuristics' params when `p` is null), runs the loop
// nest in the interpreter and its text on the emulator, and compares with the graph interpreter.
// Returns the params used.
sched::ReductionParams run_gpu(const ColumnGraph& c, DType t, const sched::ReductionParams* p, std::mt19937_64& rng,
                               const std::string& what) {
  const auto ki = c.instance();
  const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
  const sched::Params params = p ? sched::Params(*p) : s.heuristics(ki, dsl::Target::CUDA);
  const auto sk = s.schedule(ki, params, dsl::Target::CUDA);

  // The input in memory (its layout's reach); the reference reads it in logical order [N, C, H, W].
  const dsl::Shape& shape = c.g.value(c.g.inputs()[0]).type.shape;
  const int64_t n = dsl::numel(shape);
  int64_t reach = 1;
  for (size_t d = 0; d < 4; ++d) reach += (shape[d] - 1) * c.strides[d];
  const std::vector<double> xs = random_values(reach, rng, c.g.node(c.plan.groups[0].nodes.front()).op == "amax");
  jit::Tensor xt = jit::Tensor::empty({reach}, t);
  for (int64_t i = 0; i < reach; ++i) write_value(t, xt.data(), i, xs[static_cast<size_t>(i)]);
  dsl::HostTensor xh{{shape, t}, {}};
  for (int64_t a = 0; a < shape[0]; ++a)
    for (int64_t ch = 0; ch < shape[1]; ++ch)
      for (int64_t y = 0; y < shape[2]; ++y)
        for (int64_t x = 0; x < shape[3]; ++x)
          xh.data.push_back(
              read_value(t, xt.data(), a * c.strides[0] + ch * c.strides[1] + y * c.strides[2] + x * c.strides[3]));
  const auto ref = dsl::interpret_graph(c.g, {xh}, /*float64_math=*/true);

  const int out_value = c.g.outputs()[0];
  const dsl::TensorType& ot = c.g.value(out_value).type;
  jit::Tensor ot_t = jit::Tensor::empty(ot.shape, ot.dtype);
  const test::KernelCall call = test::kernel_call(sk.args, [&](int v) { return v == out_value ? ot_t : xt; });
  dsl::interpret(sk.func, call.args);
  test::expect_cuda_text_matches_interpreter(sk.func, call.args, call.spans, what);

  const int64_t rows = dsl::numel(ot.shape);
  const double terms = static_cast<double>(n / std::max<int64_t>(rows, 1));
  const double eps = t == DType::Float32 ? 1.2e-7 : t == DType::Float16 ? 9.8e-4 : 7.9e-3;
  for (int64_t i = 0; i < rows; ++i) {
    const double want = ref[0].data[static_cast<size_t>(i)];
    const double got = read_value(ot.dtype, ot_t.data(), i);
    if (!dsl::is_floating(ot.dtype)) {
      EXPECT_EQ(got, want) << what << " row " << i;
    } else if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << what << " row " << i;
    } else {
      // Rounding of the result to t, plus a float32 sum's error over `terms` terms of size ~2..8.
      EXPECT_NEAR(got, want, 2 * eps * (1 + std::fabs(want)) + 1e-6 * terms * 8) << what << " row " << i;
    }
  }
  return std::get<sched::ReductionParams>(params);
}

sched::ReductionParams column_params(int x, int y) {
  sched::ReductionParams p;
  p.gpu_block_x = x;
  p.gpu_block_y = y;
  return p;
}

// Shapes whose C is not a multiple of the tile (a short last tile), C below one tile, rows shorter
// than block_y (threads with no elements), rows longer than a block of the blocked sums (kSumBlock =
// 256 per thread: H * W > 256 * block_y), and several kept outer dims; mean, sum and a row op, var
// (the second reduction reads the first's row value in every thread), amax with a NaN.
TEST(GpuColumnReduction, LoopNestsAndCudaTextMatchTheReference) {
  auto rng = test::rng(4321);
  const std::vector<Shape> shapes = {{2, 3, 5, 40}, {1, 2, 2, 7}, {3, 1, 2, 33}, {1, 33, 70, 3}, {2, 1, 3, 64}};
  for (const Shape& shape : shapes) {
    for (const std::string op : {"mean", "sum", "var", "amax"}) {
      for (const auto& xy : {std::pair{32, 4}, std::pair{64, 8}, std::pair{32, 16}}) {
        const ColumnGraph c = column_graph(shape, op, DType::Float32);
        ASSERT_EQ(c.plan.groups.size(), 1u);
        const auto ki = c.instance();
        ASSERT_TRUE(sched::column_reduction_fits(ki)) << op << " " << dsl::shape_str(shape);
        const sched::ReductionParams p = column_params(xy.first, xy.second);
        ASSERT_TRUE(sched::gpu_column_form(ki, p));
        run_gpu(
            c, DType::Float32, &p, rng,
            op + " " + dsl::shape_str(shape) + " block " + std::to_string(xy.first) + "x" + std::to_string(xy.second));
      }
    }
  }
}

// Integer sums (int64 accumulators), integer maxima and bool any; a reduction over N, H and W whose
// N does not merge with H (padded images: two reduced dims, the thread's element index unravelled).
TEST(GpuColumnReduction, IntegersBoolsAndTwoReducedDims) {
  auto rng = test::rng(5);
  const sched::ReductionParams p = column_params(32, 4);
  for (const auto& [op, t] :
       {std::pair<std::string, DType>{"sum", DType::Int32}, {"amax", DType::Int32}, {"any", DType::Bool}}) {
    const ColumnGraph c = column_graph({2, 3, 5, 40}, op, t);
    ASSERT_TRUE(sched::gpu_column_form(c.instance(), p)) << op;
    run_gpu(c, t, &p, rng, op + " " + dsl::dtype_name(t));
  }
  for (const std::string op : {"mean", "var"}) {
    const ColumnGraph c = column_graph({3, 4, 5, 40}, op, DType::Float32, {0, 2, 3}, /*pad=*/3);
    ASSERT_EQ(c.instance().reduced.size(), 2u) << op;
    ASSERT_TRUE(sched::gpu_column_form(c.instance(), p)) << op;
    run_gpu(c, DType::Float32, &p, rng, op + " over N, H, W");
  }
}

TEST(GpuColumnReduction, HalfTypesAccumulateInFloat32) {
  auto rng = test::rng(99);
  for (const DType t : {DType::Float16, DType::BFloat16}) {
    for (const std::string op : {"mean", "sum"}) {
      const ColumnGraph c = column_graph({2, 7, 7, 48}, op, t);
      const sched::ReductionParams p = column_params(32, 8);
      run_gpu(c, t, &p, rng, op + " " + dsl::dtype_name(t));
    }
  }
}

// An average pool of 8192 channels-last rows (4 images of 2048 channels) takes the column form
// from the heuristics and runs it, as ResNet-50's at batch 64 would; rows too few for the GPU, a
// contiguous row, or the switch keep the block per row.
TEST(GpuColumnReduction, HeuristicsChooseItForManyAdjacentRows) {
  auto rng = test::rng(7);
  {
    const Shape pool = {4, 3, 3, 2048};
    const ColumnGraph c = column_graph(pool, "mean", DType::Float16);
    const sched::ReductionParams p = run_gpu(c, DType::Float16, nullptr, rng, "pool");
    EXPECT_EQ(p.gpu_block_x, 32);
    EXPECT_GT(p.gpu_block_y, 1);
  }
  auto chosen = [](const ColumnGraph& c) {
    const auto ki = c.instance();
    const auto p =
        std::get<sched::ReductionParams>(sched::scheduler_for(ki, dsl::Target::CUDA).heuristics(ki, dsl::Target::CUDA));
    return sched::gpu_column_form(ki, p);
  };
  EXPECT_TRUE(chosen(column_graph({64, 7, 7, 2048}, "sum", DType::Float32)));
  EXPECT_FALSE(chosen(column_graph({2, 7, 7, 2048}, "sum", DType::Float32)));   // 4096 rows
  EXPECT_FALSE(chosen(column_graph({4096, 7, 7, 16}, "sum", DType::Float32)));  // 16 adjacent rows
  ColumnGraph nchw = column_graph({64, 7, 7, 2048}, "mean", DType::Float32);
  nchw.layouts.clear();  // contiguous rows
  EXPECT_FALSE(chosen(nchw));
  ::setenv("FLOW_GPU_COLUMN_REDUCTION", "0", 1);
  EXPECT_FALSE(chosen(column_graph({64, 7, 7, 2048}, "sum", DType::Float32)));
  ::unsetenv("FLOW_GPU_COLUMN_REDUCTION");
}

// The kernel compiles with NVRTC, keeps its accumulators in registers (no local memory), and its
// loads of the input are one element per thread of adjacent threads (no vector width to check: a
// thread's elements are a row apart).
TEST(GpuColumnReduction, CompilesWithNvrtcWithoutLocalMemory) {
  FLOW_REQUIRE_NVRTC();
  for (const std::string op : {"mean", "var", "amax"}) {
    for (const DType t : {DType::Float32, DType::Float16}) {
      const ColumnGraph c = column_graph({64, 7, 7, 2048}, op, t);
      const auto ki = c.instance();
      const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
      const sched::Params p = s.heuristics(ki, dsl::Target::CUDA);
      ASSERT_TRUE(sched::gpu_column_form(ki, std::get<sched::ReductionParams>(p)));
      const auto sk = s.schedule(ki, p, dsl::Target::CUDA);
      const jit::cuda::CudaCompiled cc = jit::cuda::cuda_compile(sk.func, "sm_90");
      EXPECT_EQ(cc.ptx.find(".local"), std::string::npos) << op << "\n" << cc.kernel.source;
      EXPECT_NE(cc.ptx.find("bar.sync"), std::string::npos) << op;
      EXPECT_NE(cc.ptx.find(".shared"), std::string::npos) << op;
    }
  }
}

// Each reduction of a column-form group keeps a block_x x block_y buffer of partials in static
// shared memory, which CUDA limits to 48 KiB per block (ptxas refuses more): 13 float64 sums of
// 4096-element rows (4 KiB of partials each under a 32 x 16 block) take the row form, and compile;
// 11 keep the column form.
TEST(GpuColumnReduction, ManyReductionsStayWithinStaticSharedMemory) {
  FLOW_REQUIRE_NVRTC();
  auto sums = [](int count) {  // `count` float64 sums over H and W in one group
    ColumnGraph c;
    const int64_t n = 4, h = 64, w = 64, ch = 2048;  // 8192 rows of 4096 elements
    const int x = c.g.add_input({{n, ch, h, w}, DType::Float64}, "x");
    // (a chain: each sum is read back over the row by the next, x - s)
    int v = x, r = -1;
    for (int i = 0; i < count; ++i) {
      r = c.g.add("sum", {v}, {{"dims", std::vector<int64_t>{2, 3}}, {"keepdim", true}});
      if (i + 1 < count) v = c.g.add("sub", {x, r});
    }
    c.g.mark_output(r);
    c.plan = sched::fuse(c.g);
    c.strides = {h * w * ch, 1, w * ch, ch};
    c.layouts[x] = c.strides;
    return c;
  };
  for (const int count : {11, 13}) {
    const ColumnGraph c = sums(count);
    ASSERT_EQ(c.plan.groups.size(), 1u) << count << " sums are not one group";
    const auto ki = c.instance();
    EXPECT_EQ(sched::column_shared_bytes(ki, 32, 16), int64_t{count} * 32 * 16 * 8);
    const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
    const sched::Params p = s.heuristics(ki, dsl::Target::CUDA);
    EXPECT_EQ(sched::gpu_column_form(ki, std::get<sched::ReductionParams>(p)), count == 11) << count;
    if (count == 13) {
      sched::ReductionParams forced = std::get<sched::ReductionParams>(p);
      forced.gpu_block_x = 32;
      forced.gpu_block_y = 16;  // (as an autotuned record could ask)
      EXPECT_FALSE(sched::gpu_column_form(ki, forced));
      const auto sk = s.schedule(ki, p, dsl::Target::CUDA);
      const jit::cuda::CudaCompiled cc = jit::cuda::cuda_compile(sk.func, "sm_90");
      EXPECT_EQ(cc.ptx.find(".local"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace flow

// Randomly generated elementwise / broadcast / reduction graphs, compiled end to end (fusion,
// schedulers, LLVM) and checked against the graph interpreter; the GPU schedules of the same
// groups run by the loop interpreter and compiled by NVRTC. Fresh seed each run (printed at start;
// replay with FLOW_TEST_SEED).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "dsl/graph_interpreter.h"
#include "dsl/interpreter.h"
#include "jit/compile.h"
#include "jit/cuda/cuda_compile.h"
#include "jit/layouts.h"
#include "scheduler/fusion.h"
#include "simt/cuda_kernel_check.h"
#include "test_util.h"

using namespace flow;
using dsl::DType;

namespace {

struct RandomGraph {
  dsl::Graph g;
  std::vector<dsl::HostTensor> inputs;
  std::string description;
};

dsl::Shape random_shape(std::mt19937_64& rng) {
  static const int64_t dims[] = {1, 2, 3, 5, 7, 16, 33};
  std::uniform_int_distribution<int> rank(1, 3), pick(0, 6);
  dsl::Shape s(rank(rng));
  for (auto& d : s) d = dims[pick(rng)];
  return s;
}

// A shape that broadcasts to `full`: some dims replaced by 1, maybe fewer leading dims.
dsl::Shape broadcastable(const dsl::Shape& full, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> coin(0, 2);
  dsl::Shape s = full;
  for (auto& d : s)
    if (coin(rng) == 0) d = 1;
  while (!s.empty() && coin(rng) == 0) s.erase(s.begin());
  return s;
}

RandomGraph make_graph(std::mt19937_64& rng) {
  RandomGraph r;
  const dsl::Shape full = random_shape(rng);
  std::uniform_real_distribution<double> val(-2.0, 2.0);
  std::vector<int> pool;
  const int n_inputs = std::uniform_int_distribution<int>(1, 3)(rng);
  for (int i = 0; i < n_inputs; ++i) {
    const dsl::Shape s = i == 0 ? full : broadcastable(full, rng);
    pool.push_back(r.g.add_input({s, DType::Float32}, "x" + std::to_string(i)));
    dsl::HostTensor t{{s, DType::Float32}, std::vector<double>(dsl::numel(s))};
    for (auto& v : t.data) v = val(rng);
    r.inputs.push_back(std::move(t));
  }
  static const char* unary[] = {"neg", "abs", "relu", "sigmoid", "tanh", "silu", "gelu", "exp"};
  static const char* binary[] = {"add", "sub", "mul", "maximum", "minimum"};
  static const char* reduce[] = {"sum", "mean", "amax", "amin"};
  const int n_ops = std::uniform_int_distribution<int>(2, 8)(rng);
  std::uniform_int_distribution<int> kind(0, 12);
  for (int k = 0; k < n_ops; ++k) {
    auto pick = [&]() { return pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]; };
    try {
      const int c = kind(rng);
      int out;
      if (c < 3) {
        const char* op = unary[std::uniform_int_distribution<int>(0, 7)(rng)];
        int in = pick();
        if (std::string(op) == "exp") in = r.g.add("tanh", {in});  // keep magnitudes tame
        out = r.g.add(op, {in});
        r.description += std::string(op) + " ";
      } else if (c < 7) {
        const char* op = binary[std::uniform_int_distribution<int>(0, 4)(rng)];
        out = r.g.add(op, {pick(), pick()});
        r.description += std::string(op) + " ";
      } else if (c < 9) {
        const int in = pick();
        const dsl::Shape s = r.g.value(in).type.shape;  // a copy: add() grows the value arena
        std::vector<int64_t> dims;
        for (size_t d = 0; d < s.size(); ++d)
          if (std::uniform_int_distribution<int>(0, 1)(rng)) dims.push_back(static_cast<int64_t>(d));
        if (dims.empty()) dims.push_back(static_cast<int64_t>(s.size()) - 1);
        const bool keep = std::uniform_int_distribution<int>(0, 1)(rng);
        const char* op = reduce[std::uniform_int_distribution<int>(0, 3)(rng)];
        out = r.g.add(op, {in}, {{"dims", dims}, {"keepdim", keep}});
        r.description += std::string(op) + dsl::shape_str(dims) + (keep ? "k " : " ");
      } else if (c >= 10) {
        // A view: permute, reshape (flatten the last two dims), slice, expand of a size-1 dim.
        const int in = pick();
        const dsl::Shape s = r.g.value(in).type.shape;  // a copy: add() grows the value arena
        const int64_t rank = static_cast<int64_t>(s.size());
        if (rank == 0) throw dsl::OpError(dsl::OpError::Kind::Value, "no views of 0-dim values here");
        const int which = std::uniform_int_distribution<int>(0, 3)(rng);
        if (which == 0 && rank >= 2) {
          std::vector<int64_t> perm(rank);
          for (int64_t d = 0; d < rank; ++d) perm[d] = d;
          std::shuffle(perm.begin(), perm.end(), rng);
          out = r.g.add("permute", {in}, {{"dims", perm}});
          r.description += "permute ";
        } else if (which == 1 && rank >= 2) {
          std::vector<int64_t> shape(s.begin(), s.end() - 2);
          shape.push_back(-1);
          out = r.g.add("reshape", {in}, {{"shape", shape}});
          r.description += "reshape ";
        } else if (which == 2) {
          const int64_t d = std::uniform_int_distribution<int64_t>(0, rank - 1)(rng);
          out = r.g.add("slice", {in}, {{"dim", d}, {"start", int64_t{1}}, {"end", s[d]}, {"step", int64_t{2}}});
          r.description += "slice ";
        } else {
          std::vector<int64_t> shape(s.begin(), s.end());
          shape.insert(shape.begin(), 3);
          out = r.g.add("expand",
                        {r.g.add("reshape", {in}, {{"shape", std::vector<int64_t>(shape.begin() + 1, shape.end())}})},
                        {{"shape", shape}});
          r.description += "expand ";
        }
      } else {
        const int in = pick();
        const int64_t rank = static_cast<int64_t>(r.g.value(in).type.shape.size());
        out = r.g.add(std::uniform_int_distribution<int>(0, 1)(rng) ? "softmax" : "log_softmax", {in},
                      {{"dim", std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng)}});
        r.description += "softmax ";
      }
      pool.push_back(out);
    } catch (const dsl::OpError&) {
      // Shapes that do not broadcast: draw another op.
    }
  }
  r.g.mark_output(pool.back());
  if (pool.size() > 2) r.g.mark_output(pool[pool.size() / 2]);
  return r;
}

jit::Tensor to_tensor(const dsl::HostTensor& h) {
  jit::Tensor t = jit::Tensor::empty(h.type.shape, DType::Float32);
  for (size_t i = 0; i < h.data.size(); ++i) static_cast<float*>(t.data())[i] = static_cast<float>(h.data[i]);
  return t;
}

// The elements of a (possibly strided) float32 tensor in row-major order.
std::vector<float> gather(const jit::Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  std::vector<int64_t> idx(t.sizes.size(), 0);
  const float* base = static_cast<const float*>(t.data());
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides[d];
    out[k] = base[off];
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

void expect_close(const dsl::HostTensor& ref, const float* got, const std::string& what) {
  for (size_t i = 0; i < ref.data.size(); ++i) {
    const double r = ref.data[i], v = got[i];
    if (std::isnan(r)) {
      ASSERT_TRUE(std::isnan(v)) << what << " element " << i;
      continue;
    }
    ASSERT_FALSE(std::isnan(v)) << what << " element " << i << " is NaN, expected " << r;
    ASSERT_NEAR(v, r, 2e-4 * (1 + std::fabs(r))) << what << " element " << i;
  }
}

}  // namespace

#ifdef FLOW_HAS_LLVM
TEST(RandomGraphs, LlvmMatchesGraphInterpreter) {
  auto rng = test::rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    RandomGraph r = make_graph(rng);
    const auto ref = dsl::interpret_graph(r.g, r.inputs);
    std::vector<jit::Tensor> ins;
    for (const auto& h : r.inputs) ins.push_back(to_tensor(h));
    auto exe = jit::compile(r.g, {}, {});
    const auto outs = exe->run(ins);
    ASSERT_EQ(outs.size(), ref.size());
    for (size_t o = 0; o < outs.size(); ++o)
      expect_close(ref[o], gather(outs[o]).data(),
                   "trial " + std::to_string(trial) + " [" + r.description + "] output " + std::to_string(o) + "\n" +
                       exe->plan().to_string(exe->graph()));
  }
}
#endif

TEST(RandomGraphs, GpuSchedulesInterpretedMatchAndCompile) {
  auto rng = test::rng(12);
  for (int trial = 0; trial < 12; ++trial) {
    RandomGraph r = make_graph(rng);
    const auto ref = dsl::interpret_graph(r.g, r.inputs);
    r.g = jit::materialize_unviewable(r.g, {});
    // Execute the fused plan kernel by kernel with the loop interpreter on GPU schedules.
    const sched::FusionPlan plan = sched::fuse(r.g);
    const jit::ValueLayouts lay = jit::compute_layouts(r.g, {});
    sched::GroupLayouts strides;
    for (size_t v = 0; v < r.g.values().size(); ++v) strides[static_cast<int>(v)] = lay.layout[v].strides;
    std::vector<jit::Tensor> slots(r.g.values().size());
    for (size_t i = 0; i < r.inputs.size(); ++i) slots[r.g.inputs()[i]] = to_tensor(r.inputs[i]);
    auto bind = [&](int v) { return test::bind_view(slots, lay, v); };
    for (const auto& grp : plan.groups) {
      const auto ki = sched::specialize(r.g, grp, strides, true);
      for (int v : grp.outputs) {
        slots[v] = jit::Tensor::empty(r.g.value(v).type.shape, DType::Float32);
        for (int64_t i = 0; i < slots[v].numel(); ++i) static_cast<float*>(slots[v].data())[i] = NAN;  // poison
      }
      const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
      const auto sk = s.schedule(ki, s.heuristics(ki, dsl::Target::CUDA), dsl::Target::CUDA);
      const test::KernelCall call = test::kernel_call(sk.args, bind);
      const std::vector<dsl::ArgValue>& av = call.args;
      const std::vector<test::BufferSpan>& spans = call.spans;
      bool empty = false;
      for (int64_t k : ki.kept) empty = empty || k == 0;
      if (!empty) {
        dsl::interpret(sk.func, av);
        test::expect_cuda_text_matches_interpreter(sk.func, av, spans, "trial " + std::to_string(trial));
      }
      const auto compiled = jit::cuda::cuda_compile(sk.func, "sm_90");
      EXPECT_EQ(compiled.ptx.find("ld.local"), std::string::npos) << sk.func.name;
    }
    for (size_t o = 0; o < ref.size(); ++o)
      expect_close(ref[o], gather(bind(r.g.outputs()[o])).data(),
                   "trial " + std::to_string(trial) + " [" + r.description + "] output " + std::to_string(o) + "\n" +
                       plan.to_string(r.g));
  }
}

#ifdef FLOW_HAS_LLVM
// A keepdim=False reduction divided by a tensor broadcasting along a kept dim: the divide cannot be
// indexed in the reduction's domain, so it runs as its own kernel (it once failed to compile).
TEST(RandomGraphs, ReducedValueWithBroadcastOperand) {
  auto rng = test::rng(13);
  dsl::Graph g;
  const int x = g.add_input({{2, 3, 4}, DType::Float32});
  const int d = g.add_input({{3}, DType::Float32});
  g.mark_output(g.add("div", {g.add("sum", {x}, {{"dims", std::vector<int64_t>{2}}, {"keepdim", false}}), d}));
  std::vector<dsl::HostTensor> host;
  std::uniform_real_distribution<double> v(1.0, 2.0);
  for (const dsl::Shape& s : {dsl::Shape{2, 3, 4}, dsl::Shape{3}}) {
    dsl::HostTensor h{{s, DType::Float32}, std::vector<double>(dsl::numel(s))};
    for (auto& e : h.data) e = v(rng);
    host.push_back(h);
  }
  const auto ref = dsl::interpret_graph(g, host);
  auto exe = jit::compile(g, {}, {});
  const auto out = exe->run({to_tensor(host[0]), to_tensor(host[1])});
  expect_close(ref[0], gather(out[0]).data(), exe->explain(false));
}
#endif

#ifdef FLOW_HAS_LLVM
// A [C] weight next to a square [C, C] reduction domain broadcasts along the last dim (as torch),
// although its shape equals the reduced shape (a layer norm of a square input once got this wrong).
TEST(RandomGraphs, SquareDomainWeightBroadcasts) {
  auto rng = test::rng(14);
  const int64_t C = 37;
  dsl::Graph g;
  const int x = g.add_input({{C, C}, DType::Float32});
  const int w = g.add_input({{C}, DType::Float32});
  const int mu = g.add("mean", {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
  g.mark_output(g.add("mul", {g.add("sub", {x, mu}), w}));
  std::vector<dsl::HostTensor> host;
  std::normal_distribution<double> v;
  for (const dsl::Shape& s : {dsl::Shape{C, C}, dsl::Shape{C}}) {
    dsl::HostTensor h{{s, DType::Float32}, std::vector<double>(dsl::numel(s))};
    for (auto& e : h.data) e = v(rng);
    host.push_back(h);
  }
  const auto ref = dsl::interpret_graph(g, host);
  auto exe = jit::compile(g, {}, {});
  EXPECT_EQ(exe->num_kernels(), 1);
  const auto out = exe->run({to_tensor(host[0]), to_tensor(host[1])});
  expect_close(ref[0], gather(out[0]).data(), exe->explain(false));
}
#endif

#ifdef FLOW_HAS_LLVM
namespace {
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
std::string cpu_loop_nest(const std::string& explain) {
  const size_t begin = explain.find("-- loop nest --");
  return explain.substr(begin, explain.find("-- CUDA", begin) - begin);
}
}  // namespace

// Softmax-like groups: exp(x - m) feeds the last reduction and the outputs, so the reduction pass
// stores it into an output and the final pass reads it back (exp appears in the sum's pass only, in
// each of its three loops: wide SIMD steps, one-register steps and the scalar tail). Rows with -inf, +inf and NaN, rows
// shorter than one vector, several reduced dims and a second full output (read after the first output's store overwrote
// the stored value) all match the graph interpreter.
TEST(RandomGraphs, LastReductionInputIsStoredOnceAndReadBack) {
  auto rng = test::rng(15);
  std::normal_distribution<double> v(0.0, 3.0);
  for (const dsl::Shape& shape :
       {dsl::Shape{1, 1, 1}, dsl::Shape{3, 1, 7}, dsl::Shape{2, 1, 64}, dsl::Shape{5, 2, 65}, dsl::Shape{4, 3, 130}}) {
    for (bool two_outputs : {false, true}) {
      dsl::Graph g;
      const int x = g.add_input({shape, DType::Float32}, "x");
      const dsl::Attrs red{{"dims", std::vector<int64_t>{1, 2}}, {"keepdim", true}};
      const int e = g.add("exp", {g.add("sub", {x, g.add("amax", {x}, red)})});
      g.mark_output(g.add("mul", {e, g.add("reciprocal", {g.add("sum", {e}, red)})}));
      if (two_outputs) g.mark_output(g.add("add", {e, g.add_constant(1.0, DType::Float64, true)}));
      dsl::HostTensor h{{shape, DType::Float32}, std::vector<double>(dsl::numel(shape))};
      for (auto& el : h.data) el = static_cast<float>(v(rng));
      if (shape[0] >= 4) {  // row 1: one -inf; row 2: one +inf (NaN row); row 3: a NaN
        const int64_t row = dsl::numel(shape) / shape[0];
        h.data[row + 3] = -INFINITY;
        h.data[2 * row + 5] = INFINITY;
        h.data[3 * row + 1] = NAN;
      }
      const auto ref = dsl::interpret_graph(g, {h});
      auto exe = jit::compile(g, {}, {});
      const std::string what = "shape " + dsl::shape_str(shape) + (two_outputs ? " two outputs" : "");
      ASSERT_EQ(exe->num_kernels(), 1) << what << "\n" << exe->explain(false);
      EXPECT_EQ(count_of(cpu_loop_nest(exe->explain(true)), "exp("), 3) << what << "\n" << exe->explain(true);
      const auto outs = exe->run({to_tensor(h)});
      for (size_t o = 0; o < outs.size(); ++o) expect_close(ref[o], gather(outs[o]).data(), what);
    }
  }
}

// Where the output does not use the last reduction's input (layer norm's output uses x - mean, not
// its square), or the stored dtype would differ (a half softmax computes exp in float32), nothing is
// stored: the final pass computes its values as before, and the results match.
TEST(RandomGraphs, NothingStoredWhenTheOutputDoesNotUseTheLastReductionInput) {
  auto rng = test::rng(16);
  std::normal_distribution<double> v(0.0, 2.0);
  const dsl::Shape shape{6, 100};
  dsl::HostTensor h{{shape, DType::Float32}, std::vector<double>(dsl::numel(shape))};
  for (auto& el : h.data) el = v(rng);
  {
    dsl::Graph g;
    const int x = g.add_input({shape, DType::Float32}, "x");
    const dsl::Attrs red{{"dims", std::vector<int64_t>{1}}, {"keepdim", true}};
    const int c = g.add("sub", {x, g.add("mean", {x}, red)});
    const int var = g.add("mean", {g.add("mul", {c, c})}, red);
    g.mark_output(g.add("mul", {c, g.add("rsqrt", {var})}));
    auto exe = jit::compile(g, {}, {});
    const std::string nest = cpu_loop_nest(exe->explain(true));
    EXPECT_EQ(count_of(nest, "= out"), 0) << nest;  // no output element is read back
    expect_close(dsl::interpret_graph(g, {h})[0], gather(exe->run({to_tensor(h)})[0]).data(), "layer norm");
  }
  {
    dsl::Graph g;
    const int x = g.add_input({shape, DType::Float32}, "x");
    const int half = g.add("cast", {x}, {{"dtype", std::string("float16")}});
    g.mark_output(g.add("softmax", {half}, {{"dim", int64_t{-1}}}));
    auto exe = jit::compile(g, {}, {});
    const std::string nest = cpu_loop_nest(exe->explain(true));
    EXPECT_EQ(count_of(nest, "exp("), 6) << nest;  // computed in the sum's pass and again in the last
    const auto ref = dsl::interpret_graph(g, {h});
    const auto out = exe->run({to_tensor(h)})[0];
    const auto* p = static_cast<const uint16_t*>(out.data());
    for (size_t i = 0; i < ref[0].data.size(); ++i)
      ASSERT_NEAR(dsl::half_bits_to_float(p[i]), ref[0].data[i], 2e-3) << "half softmax element " << i;
  }
}
#endif

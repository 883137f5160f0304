// The GPU scatter (runtime/scatter_kernel.h): its source compiles with NVRTC for every architecture
// CUDA 13 targets, without local memory, its atomic path through atom.cas; its launch plan; and its
// text, run on the host SIMT emulator exactly as scatter() launches it (and on a device where there
// is one), gives the serial scatter's result for every element type, reduction, include_self, both
// paths (a thread per line, a thread per position), duplicates, NaN and out-of-range indices, which
// are skipped and reported into the device's error word (runtime/device_error.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "runtime/buffer.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_stream.h"
#include "runtime/device_error.h"
#include "runtime/nvrtc.h"
#include "runtime/scatter_kernel.h"
#include "simt/simt_emulator.h"

namespace flow {
namespace {

namespace rc = runtime::cuda;
using rc::FixedKernelType;
using rc::ScatterReduce;
using test::contains;

const std::vector<FixedKernelType> kTypes = {FixedKernelType::Float32, FixedKernelType::Float64, FixedKernelType::Int32,
                                             FixedKernelType::Int64, FixedKernelType::Bool};
const std::vector<ScatterReduce> kReduces = {ScatterReduce::None, ScatterReduce::Sum, ScatterReduce::Prod,
                                             ScatterReduce::Amax, ScatterReduce::Amin};
const char* suffix(FixedKernelType t) {
  return rc::fixed_kernel_suffix(t);
}
size_t element_size(FixedKernelType t) {
  return t == FixedKernelType::Bool ? 1 : (t == FixedKernelType::Float32 || t == FixedKernelType::Int32) ? 4 : 8;
}
bool is_float(FixedKernelType t) {
  return t == FixedKernelType::Float32 || t == FixedKernelType::Float64;
}

// Element bytes <-> values (the values used are exact in every type).
void put(FixedKernelType t, std::vector<uint8_t>& bytes, size_t i, double v) {
  uint8_t* p = bytes.data() + i * element_size(t);
  switch (t) {
    case FixedKernelType::Float32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case FixedKernelType::Float64:
      std::memcpy(p, &v, 8);
      break;
    case FixedKernelType::Int32: {
      const auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case FixedKernelType::Int64: {
      const auto x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    default:
      *p = v != 0 ? 1 : 0;
  }
}
double get(FixedKernelType t, const std::vector<uint8_t>& bytes, size_t i) {
  const uint8_t* p = bytes.data() + i * element_size(t);
  switch (t) {
    case FixedKernelType::Float32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case FixedKernelType::Float64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case FixedKernelType::Int32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case FixedKernelType::Int64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    default:
      return *p;
  }
}

struct Case {
  std::vector<int64_t> index_shape, src_shape, out_shape;
  int dim;
};
const std::vector<Case> kCases = {
    {{40}, {45}, {7}, 0},                  // 1-D, many duplicates (a histogram)
    {{3, 5}, {4, 6}, {3, 4}, 1},           // src larger than the index
    {{6, 2}, {6, 3}, {4, 2}, 0},           // along dim 0
    {{2, 3, 4}, {2, 3, 4}, {2, 5, 4}, 1},  // inner dims
    {{0, 3}, {1, 3}, {2, 3}, 0},           // empty index
};

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
  return st;
}
int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

struct Problem {
  rc::ScatterShape shape;
  FixedKernelType type;
  std::vector<uint8_t> self, src;
  std::vector<int64_t> index;
};

Problem make_problem(const Case& c, FixedKernelType t, ScatterReduce r, bool include_self, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.type = t;
  rc::ScatterShape& s = p.shape;
  s.rank = static_cast<int>(c.index_shape.size());
  s.dim = c.dim;
  const auto ss = strides_of(c.src_shape), os = strides_of(c.out_shape);
  for (int d = 0; d < s.rank; ++d) {
    s.sizes[d] = c.index_shape[static_cast<size_t>(d)];
    s.src_strides[d] = ss[static_cast<size_t>(d)];
    s.out_strides[d] = os[static_cast<size_t>(d)];
  }
  s.out_dim_size = c.out_shape[static_cast<size_t>(c.dim)];
  s.reduce = r;
  s.include_self = include_self;
  const auto value = [&](bool for_prod) {
    if (t == FixedKernelType::Bool) return static_cast<double>(rng() % 2);
    if (is_float(t) && (r == ScatterReduce::Amax || r == ScatterReduce::Amin) && rng() % 20 == 0) return std::nan("");
    if (for_prod) {
      const int k = static_cast<int>(rng() % 3);
      return k == 0 ? -1.0 : k == 1 ? 1.0 : 2.0;
    }
    return static_cast<double>(static_cast<int>(rng() % 17) - 8);
  };
  p.self.resize(static_cast<size_t>(count_of(c.out_shape)) * element_size(t));
  for (size_t i = 0; i < static_cast<size_t>(count_of(c.out_shape)); ++i) put(t, p.self, i, value(false));
  p.src.resize(static_cast<size_t>(count_of(c.src_shape)) * element_size(t));
  for (size_t i = 0; i < static_cast<size_t>(count_of(c.src_shape)); ++i)
    put(t, p.src, i, value(r == ScatterReduce::Prod));
  const int64_t n = count_of(c.index_shape);
  p.index.resize(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    // Reduce none stores: with duplicates the winner is unspecified on the positions path, so
    // the targets of one line are distinct there (a rotation); other reductions get duplicates.
    const int64_t j =
        (e / strides_of(c.index_shape)[static_cast<size_t>(c.dim)]) % c.index_shape[static_cast<size_t>(c.dim)];
    const int64_t distinct = j < s.out_dim_size ? (j + static_cast<int64_t>(seed)) % s.out_dim_size : -1;
    p.index[static_cast<size_t>(e)] =
        r == ScatterReduce::None ? distinct : static_cast<int64_t>(rng() % static_cast<uint32_t>(s.out_dim_size));
    if (rng() % 25 == 0) p.index[static_cast<size_t>(e)] = rng() % 2 ? -1 : s.out_dim_size;  // out of range
  }
  return p;
}

// The serial scatter, in double: positions in row-major order; out-of-range indices skipped.
std::vector<double> expected(const Problem& p) {
  const rc::ScatterShape& s = p.shape;
  const int64_t out_count = static_cast<int64_t>(p.self.size() / element_size(p.type));
  std::vector<double> out(static_cast<size_t>(out_count));
  for (int64_t i = 0; i < out_count; ++i) out[static_cast<size_t>(i)] = get(p.type, p.self, static_cast<size_t>(i));
  const bool is_bool = p.type == FixedKernelType::Bool;
  std::vector<std::pair<int64_t, int64_t>> hits;  // (target, source)
  for (int64_t e = 0; e < static_cast<int64_t>(p.index.size()); ++e) {
    const int64_t v = p.index[static_cast<size_t>(e)];
    if (v < 0 || v >= s.out_dim_size) continue;
    int64_t rest = e, target = 0, source = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t c = rest % s.sizes[d];
      rest /= s.sizes[d];
      target += (d == s.dim ? v : c) * s.out_strides[d];
      source += c * s.src_strides[d];
    }
    hits.emplace_back(target, source);
  }
  const double inf = std::numeric_limits<double>::infinity();
  double identity = 0;
  if (s.reduce == ScatterReduce::Prod) identity = 1;
  if (s.reduce == ScatterReduce::Amax) identity = is_bool ? 0 : p.type == FixedKernelType::Int32 ? INT32_MIN : -inf;
  if (s.reduce == ScatterReduce::Amin) identity = is_bool ? 1 : p.type == FixedKernelType::Int32 ? INT32_MAX : inf;
  if (p.type == FixedKernelType::Int64 && std::isinf(identity))
    identity = identity > 0 ? static_cast<double>(INT64_MAX) : static_cast<double>(INT64_MIN);
  if (!s.include_self && s.reduce != ScatterReduce::None)
    for (const auto& h : hits) out[static_cast<size_t>(h.first)] = identity;
  for (const auto& h : hits) {
    double& o = out[static_cast<size_t>(h.first)];
    const double v = get(p.type, p.src, static_cast<size_t>(h.second));
    switch (s.reduce) {
      case ScatterReduce::None:
        o = v;
        break;
      case ScatterReduce::Sum:
        o = is_bool ? double(o != 0 || v != 0) : o + v;
        break;
      case ScatterReduce::Prod:
        o = is_bool ? double(o != 0 && v != 0) : o * v;
        break;
      default:
        if (std::isnan(o) || std::isnan(v))
          o = std::nan("");
        else
          o = s.reduce == ScatterReduce::Amax ? std::max(o, v) : std::min(o, v);
    }
  }
  return out;
}

bool has_bad_index(const Problem& p) {
  return std::any_of(p.index.begin(), p.index.end(), [&](int64_t v) { return v < 0 || v >= p.shape.out_dim_size; });
}

// The error word after a run: empty when every index is in range, else a report of one of the
// problem's bad indices (which one is unspecified: the first thread to claim the word wins).
void expect_a_true_report(const Problem& p, const std::array<long long, 4>& word) {
  if (!has_bad_index(p)) {
    EXPECT_EQ(word, (std::array<long long, 4>{})) << "a report with every index in range";
    return;
  }
  EXPECT_EQ(word[0], static_cast<long long>(rc::DeviceErrorCode::IndexOutOfBounds));
  EXPECT_EQ(word[2], p.shape.out_dim_size);
  EXPECT_EQ(word[3], p.shape.dim);
  EXPECT_TRUE(word[1] < 0 || word[1] >= p.shape.out_dim_size) << "reported index " << word[1] << " is in range";
  EXPECT_NE(std::find(p.index.begin(), p.index.end(), word[1]), p.index.end())
      << "reported index " << word[1] << " is not in the problem";
}

void check_scatter(const std::function<void(const Problem&, rc::ScatterPath, std::vector<uint8_t>&)>& run) {
  uint32_t seed = 5;
  for (const Case& c : kCases)
    for (const FixedKernelType t : kTypes)
      for (const ScatterReduce r : kReduces)
        for (const bool include_self : {true, false})
          for (const rc::ScatterPath path : {rc::ScatterPath::Lines, rc::ScatterPath::Positions}) {
            SCOPED_TRACE(std::string(suffix(t)) + " reduce " + std::to_string(static_cast<int>(r)) +
                         (include_self ? "" : " exclude self") +
                         (path == rc::ScatterPath::Lines ? " lines" : " positions") + " dim " + std::to_string(c.dim) +
                         " rank " + std::to_string(c.index_shape.size()));
            const Problem p = make_problem(c, t, r, include_self, ++seed);
            std::vector<uint8_t> out = p.self;
            run(p, path, out);
            const std::vector<double> want = expected(p);
            for (size_t i = 0; i < want.size(); ++i) {
              const double got = get(t, out, i);
              if (std::isnan(want[i])) {
                EXPECT_TRUE(std::isnan(got)) << "element " << i;
              } else {
                EXPECT_EQ(got, want[i]) << "element " << i;
              }
            }
          }
}

TEST(ScatterKernel, CompilesForEveryArchWithoutLocalMemory) {
  FLOW_REQUIRE_NVRTC();
  for (const char* arch : {"sm_75", "sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    const runtime::NvrtcResult r =
        runtime::nvrtc_compile(rc::scatter_kernel_source(), "flow_scatter_test", arch, {}, {});
    EXPECT_FALSE(r.cubin.empty());
    for (const FixedKernelType t : kTypes)
      for (const char* kind : {"lines", "positions", "reset"}) {
        const std::string name = std::string("flow_scatter_") + kind + "_" + suffix(t);
        EXPECT_TRUE(contains(r.ptx, ".entry " + name + "(")) << name;
      }
    EXPECT_TRUE(contains(r.ptx, "atom.global.cas.b32")) << "4-byte atomics";
    EXPECT_TRUE(contains(r.ptx, "atom.global.cas.b64")) << "8-byte atomics";
    EXPECT_FALSE(contains(r.ptx, ".local")) << "local memory in the scatter kernel";
  }
}

TEST(ScatterKernel, PlanPicksLinesOrPositions) {
  rc::ScatterShape s;
  s.rank = 2;
  s.dim = 1;
  s.sizes[0] = rc::kScatterLinesPath;
  s.sizes[1] = 3;
  s.out_dim_size = 5;
  s.reduce = ScatterReduce::Sum;
  auto plan = rc::plan_scatter(FixedKernelType::Float32, s);
  ASSERT_EQ(plan.size(), 1u);  // enough lines: one thread each, no atomics
  EXPECT_EQ(plan[0].entry, "flow_scatter_lines_f32");
  EXPECT_EQ(plan[0].blocks, static_cast<unsigned>(rc::kScatterLinesPath / 256));

  s.sizes[0] = 10;  // few lines: a thread per position; excluding self resets the targets first
  s.include_self = false;
  plan = rc::plan_scatter(FixedKernelType::Int64, s);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].entry, "flow_scatter_reset_i64");
  EXPECT_EQ(plan[1].entry, "flow_scatter_positions_i64");
  s.reduce = ScatterReduce::None;  // stores need no reset
  EXPECT_EQ(rc::plan_scatter(FixedKernelType::Bool, s).size(), 1u);
  EXPECT_EQ(rc::plan_scatter(FixedKernelType::Bool, s, rc::ScatterPath::Lines)[0].entry, "flow_scatter_lines_b8");

  s.sizes[1] = 0;
  EXPECT_TRUE(rc::plan_scatter(FixedKernelType::Float32, s).empty());
  EXPECT_THROW(rc::plan_scatter(FixedKernelType::Float16, s), std::invalid_argument);
  s.rank = rc::kScatterMaxRank + 1;
  EXPECT_THROW(rc::plan_scatter(FixedKernelType::Float32, s), std::invalid_argument);
}

// The kernels' text on the SIMT emulator (threads in a shuffled order), launched as scatter()
// launches them, on both paths.
TEST(ScatterKernel, RunsOnTheSimtEmulator) {
  std::vector<std::string> entries;
  for (const FixedKernelType t : kTypes)
    for (const char* kind : {"lines", "positions", "reset"})
      entries.push_back(std::string("flow_scatter_") + kind + "_" + suffix(t));
  const auto module = test::simt::module_for(rc::scatter_kernel_source(), entries);
  check_scatter([&](const Problem& p, rc::ScatterPath path, std::vector<uint8_t>& out) {
    rc::ScatterParams params = rc::scatter_params(p.shape);
    void* out_ptr = out.data();
    const void* index_ptr = p.index.data();
    const void* src_ptr = p.src.data();
    std::array<long long, 4> word{};
    long long* err = word.data();
    void* args[5] = {&out_ptr, &index_ptr, &src_ptr, &params, &err};
    uint64_t seed = 7;
    for (const rc::ScatterLaunch& l : rc::plan_scatter(p.type, p.shape, path))
      ASSERT_NO_THROW(module->launch(l.entry, {l.blocks}, {l.threads}, args, ++seed)) << module->source_path();
    expect_a_true_report(p, word);
  });
}

TEST(ScatterKernelGpu, MatchesTheSerialScatter) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_NVRTC();
  check_scatter([](const Problem& p, rc::ScatterPath path, std::vector<uint8_t>& out) {
    auto dev = [](size_t bytes) {
      return runtime::Buffer::allocate(std::max<size_t>(bytes, 1), runtime::DeviceType::CUDA);
    };
    auto o = dev(out.size()), ix = dev(p.index.size() * 8), s = dev(p.src.size());
    rc::copy_host_to_device(o->data(), out.data(), out.size());
    if (!p.index.empty()) rc::copy_host_to_device(ix->data(), p.index.data(), p.index.size() * 8);
    if (!p.src.empty()) rc::copy_host_to_device(s->data(), p.src.data(), p.src.size());
    rc::scatter(p.type, o->data(), static_cast<const int64_t*>(ix->data()), s->data(), p.shape, rc::current_stream(),
                path);
    // A bad index is reported at the first copy back (runtime/device_error.h), then reset.
    if (has_bad_index(p)) {
      EXPECT_THROW(rc::copy_device_to_host(out.data(), o->data(), out.size()), std::runtime_error);
    }
    rc::copy_device_to_host(out.data(), o->data(), out.size());
  });
}

// One bad index among good ones, on both paths: reported exactly (code, dim, the index, the size)
// with torch's wording; the good positions are still scattered.
TEST(ScatterKernel, ReportsAnIndexOutOfRange) {
  const auto module =
      test::simt::module_for(rc::scatter_kernel_source(), {"flow_scatter_lines_f32", "flow_scatter_positions_f32"});
  for (const rc::ScatterPath path : {rc::ScatterPath::Lines, rc::ScatterPath::Positions}) {
    SCOPED_TRACE(path == rc::ScatterPath::Lines ? "lines" : "positions");
    rc::ScatterShape s;
    s.rank = 2;
    s.dim = 1;
    s.sizes[0] = 2;
    s.sizes[1] = 3;
    s.src_strides[0] = s.out_strides[0] = 3;
    s.src_strides[1] = s.out_strides[1] = 1;
    s.out_dim_size = 3;
    s.reduce = ScatterReduce::Sum;
    std::vector<int64_t> index = {0, 1, 2, 2, 7, 0};
    std::vector<float> src = {1, 2, 3, 4, 5, 6}, out(6, 0.0f);
    rc::ScatterParams params = rc::scatter_params(s);
    std::array<long long, 4> word{};
    void* out_ptr = out.data();
    const void* ix = index.data();
    const void* sp = src.data();
    long long* err = word.data();
    void* args[5] = {&out_ptr, &ix, &sp, &params, &err};
    for (const rc::ScatterLaunch& l : rc::plan_scatter(FixedKernelType::Float32, s, path))
      module->launch(l.entry, {l.blocks}, {l.threads}, args, 11);
    EXPECT_EQ(word, (std::array<long long, 4>{3, 7, 3, 1}));  // code, index, size, dim
    EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 6, 0, 4}));
    EXPECT_NE(rc::device_error_message(word[0], word[1], word[2], word[3])
                  .find("index 7 is out of bounds for dimension 1 with size 3"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace flow

// The GPU sort of argsort (runtime/sort_kernel.h): its source compiles with NVRTC for every
// architecture CUDA 13 targets without local memory; its launch plan; and its text, run on the host
// SIMT emulator exactly as argsort_lines launches it (and on a device where there is one), gives the
// positions a stable sort gives, for every element type, with NaN, infinities, signed zeros and
// ties, for lines that fit one tile and lines that need the global merge steps.
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
#include "runtime/nvrtc.h"
#include "runtime/sort_kernel.h"
#include "simt/simt_emulator.h"

namespace flow {
namespace {

namespace rc = runtime::cuda;
using rc::SortKeyType;
using test::contains;

const std::vector<SortKeyType> kTypes = {SortKeyType::Float32, SortKeyType::Float16, SortKeyType::BFloat16,
                                         SortKeyType::Float64, SortKeyType::Int32,   SortKeyType::Int64,
                                         SortKeyType::Bool};
const char* suffix(SortKeyType t) {
  static const char* names[] = {"f32", "f16", "bf16", "f64", "i32", "i64", "bool"};
  return names[static_cast<int>(t)];
}
size_t element_size(SortKeyType t) {
  switch (t) {
    case SortKeyType::Float16:
    case SortKeyType::BFloat16:
      return 2;
    case SortKeyType::Float32:
    case SortKeyType::Int32:
      return 4;
    case SortKeyType::Float64:
    case SortKeyType::Int64:
      return 8;
    case SortKeyType::Bool:
      return 1;
  }
  return 0;
}

// Values of a few kinds: floats from a small set (ties) and specials, or random.
struct Elements {
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // what each element is worth (exact for these values)
};
Elements make_elements(SortKeyType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t size = element_size(t);
  Elements e;
  e.bytes.resize(static_cast<size_t>(n) * size);
  e.values.resize(static_cast<size_t>(n));
  const double specials[] = {std::nan(""), INFINITY, -INFINITY, 0.0, -0.0, 1.5, -2.0};
  for (int64_t i = 0; i < n; ++i) {
    double v = static_cast<double>(static_cast<int>(rng() % 64) - 32) / 4;  // ties, exact in every float type
    if (rng() % 16 == 0) v = specials[rng() % 7];
    uint8_t* p = e.bytes.data() + static_cast<size_t>(i) * size;
    switch (t) {
      case SortKeyType::Float32: {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case SortKeyType::Float64:
        std::memcpy(p, &v, 8);
        break;
      case SortKeyType::Float16:
      case SortKeyType::BFloat16: {
        // bfloat16 is the top half of a float32; binary16 from the float32 bits of these exact values.
        const float f = static_cast<float>(v);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        uint16_t h;
        if (t == SortKeyType::BFloat16) {
          h = static_cast<uint16_t>(u >> 16);
        } else if (std::isnan(f)) {
          h = 0x7E00;
        } else if (std::isinf(f)) {
          h = f > 0 ? 0x7C00 : 0xFC00;
        } else if (f == 0) {
          h = std::signbit(f) ? 0x8000 : 0;
        } else {  // |v| in [0.25, 8]: a normal binary16, mantissa exact
          const int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
          h = static_cast<uint16_t>(((u >> 16) & 0x8000) | (exp << 10) | ((u >> 13) & 0x3FF));
        }
        std::memcpy(p, &h, 2);
        break;
      }
      case SortKeyType::Int32: {
        const auto k = static_cast<int32_t>(std::isfinite(v) ? v * 4 : 7);
        std::memcpy(p, &k, 4);
        v = k;
        break;
      }
      case SortKeyType::Int64: {
        const int64_t k = std::isfinite(v) ? static_cast<int64_t>(v * 4) * (int64_t{1} << 40) : int64_t{7};
        std::memcpy(p, &k, 8);
        v = static_cast<double>(k);
        break;
      }
      case SortKeyType::Bool:
        *p = static_cast<uint8_t>(v > 0);
        v = *p;
        break;
    }
    e.values[static_cast<size_t>(i)] = v;
  }
  return e;
}

// The positions a stable sort gives (NaN above every number), written independently of flow's.
std::vector<int64_t> expected_positions(const Elements& e, const rc::SortShape& s) {
  std::vector<int64_t> out(static_cast<size_t>(s.outer * s.k * s.inner));
  std::vector<int64_t> pos(static_cast<size_t>(s.len));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      auto v = [&](int64_t p) { return e.values[static_cast<size_t>((o * s.len + p) * s.inner + i)]; };
      for (int64_t p = 0; p < s.len; ++p) pos[static_cast<size_t>(p)] = p;
      std::stable_sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) {
        const double x = v(a), y = v(b);
        if (std::isnan(x) || std::isnan(y)) return s.descending ? !std::isnan(y) : !std::isnan(x) && std::isnan(y);
        return s.descending ? x > y : x < y;
      });
      for (int64_t j = 0; j < s.k; ++j)
        out[static_cast<size_t>((o * s.k + j) * s.inner + i)] = pos[static_cast<size_t>(j)];
    }
  return out;
}

struct SortCase {
  int64_t outer, len, inner, k;
  bool descending;
};
const std::vector<SortCase> kCases = {
    {1, 1, 1, 1, false},   {3, 7, 1, 7, false},       {2, 33, 3, 5, true},   {1, 2048, 1, 2048, false},
    {2, 2049, 1, 3, true}, {1, 5000, 1, 5000, false}, {2, 100, 2, 0, false},
};

// Runs `sort(type, x, out, shape)` over every case and type and compares with the stable sort.
void check_sort(
    const std::function<void(SortKeyType, const Elements&, std::vector<int64_t>&, const rc::SortShape&)>& sort) {
  uint32_t seed = 11;
  for (const SortCase& c : kCases)
    for (const SortKeyType t : kTypes) {
      rc::SortShape s;
      s.outer = c.outer;
      s.len = c.len;
      s.inner = c.inner;
      s.k = c.k;
      s.descending = c.descending;
      SCOPED_TRACE(std::string(suffix(t)) + " [" + std::to_string(c.outer) + ", " + std::to_string(c.len) + ", " +
                   std::to_string(c.inner) + "] k=" + std::to_string(c.k) + (c.descending ? " descending" : ""));
      const Elements e = make_elements(t, c.outer * c.len * c.inner, ++seed);
      std::vector<int64_t> got(static_cast<size_t>(c.outer * c.k * c.inner), -1);
      sort(t, e, got, s);
      EXPECT_EQ(got, expected_positions(e, s));
    }
}

TEST(SortKernel, CompilesForEveryArchWithoutLocalMemory) {
  FLOW_REQUIRE_NVRTC();
  for (const char* arch : {"sm_75", "sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    const runtime::NvrtcResult r = runtime::nvrtc_compile(rc::sort_kernel_source(), "flow_sort_test", arch, {}, {});
    EXPECT_FALSE(r.cubin.empty());
    for (const SortKeyType t : kTypes)
      for (const char* kind : {"block", "step"}) {
        const std::string name = std::string("flow_sort_") + kind + "_" + suffix(t);
        EXPECT_TRUE(contains(r.ptx, ".entry " + name + "(")) << name;
      }
    EXPECT_FALSE(contains(r.ptx, ".local")) << "local memory in the sort kernel";
  }
}

TEST(SortKernel, PlanIsOneLaunchPerTileSortAndLogSquaredMergesBeyond) {
  rc::SortShape s;
  s.outer = 3;
  s.len = 2048;
  s.inner = 2;
  s.k = 10;
  rc::SortPlan p = rc::plan_sort(SortKeyType::Float32, s, 4);
  EXPECT_EQ(p.padded, 2048);
  EXPECT_EQ(p.scratch_elements, 0);
  ASSERT_EQ(p.launches.size(), 1u);
  EXPECT_EQ(p.launches[0].entry, "flow_sort_block_f32");
  EXPECT_EQ(p.launches[0].first + p.launches[0].last, 2);
  EXPECT_EQ(p.launches[0].blocks, 6u);

  s.len = 5000;  // padded to 8192: tiles, then levels 4096 (j = 2048) and 8192 (j = 4096, 2048)
  p = rc::plan_sort(SortKeyType::Float64, s, 4);
  EXPECT_EQ(p.padded, 8192);
  EXPECT_EQ(p.scratch_elements, 6 * 8192);
  std::vector<std::string> kinds;
  for (const auto& l : p.launches) kinds.push_back(l.entry.substr(10, 5) + std::to_string(l.j));
  EXPECT_EQ(kinds, (std::vector<std::string>{"block0", "step_2048", "block0", "step_4096", "step_2048", "block0"}));
  EXPECT_EQ(p.launches.back().last, 1);
  EXPECT_EQ(p.launches.front().last, 0);

  s.k = 0;
  EXPECT_TRUE(rc::plan_sort(SortKeyType::Int32, s, 4).launches.empty());
  s.k = 1;
  s.len = int64_t{1} << 31;
  EXPECT_THROW(rc::plan_sort(SortKeyType::Int32, s, 4), std::invalid_argument);
}

// The kernel's text on the SIMT emulator (threads in shuffled order between barriers), launched as
// argsort_lines launches it, with one SM so the blocks' loops go round.
TEST(SortKernel, RunsOnTheSimtEmulator) {
  std::vector<std::string> entries;
  for (const SortKeyType t : kTypes)
    for (const char* kind : {"block", "step"}) entries.push_back(std::string("flow_sort_") + kind + "_" + suffix(t));
  const auto module = test::simt::module_for(rc::sort_kernel_source(), entries);
  check_sort([&](SortKeyType t, const Elements& e, std::vector<int64_t>& got, const rc::SortShape& s) {
    const rc::SortPlan plan = rc::plan_sort(t, s, /*sm_count=*/1);
    std::vector<int32_t> scratch(static_cast<size_t>(plan.scratch_elements), -1);
    const void* x = e.bytes.data();
    int64_t* out = got.data();
    int32_t* scratch_ptr = scratch.empty() ? nullptr : scratch.data();
    long long outer = s.outer, len = s.len, inner = s.inner, k = s.k, padded = plan.padded;
    int descending = s.descending ? 1 : 0;
    uint64_t seed = 3;
    for (const rc::SortLaunch& l : plan.launches) {
      int first = l.first, last = l.last;
      long long k_begin = l.k_begin, k_end = l.k_end, j = l.j;
      void* params[14] = {&x,      &out,        &scratch_ptr, &outer, &len,     &inner, &k,
                          &padded, &descending, &first,       &last,  &k_begin, &k_end, &j};
      ASSERT_NO_THROW(module->launch(l.entry, {l.blocks}, {l.threads}, params, ++seed)) << module->source_path();
    }
  });
}

TEST(SortKernelGpu, MatchesAStableSort) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_NVRTC();
  check_sort([](SortKeyType t, const Elements& e, std::vector<int64_t>& got, const rc::SortShape& s) {
    auto x = runtime::Buffer::allocate(std::max<size_t>(e.bytes.size(), 1), runtime::DeviceType::CUDA);
    auto out = runtime::Buffer::allocate(std::max<size_t>(got.size() * 8, 1), runtime::DeviceType::CUDA);
    const int64_t scratch_elements = rc::plan_sort(t, s, 1).scratch_elements;
    auto scratch = runtime::Buffer::allocate(static_cast<size_t>(std::max<int64_t>(scratch_elements, 1)) * 4,
                                             runtime::DeviceType::CUDA);
    if (!e.bytes.empty()) rc::copy_host_to_device(x->data(), e.bytes.data(), e.bytes.size());
    rc::argsort_lines(t, x->data(), static_cast<int64_t*>(out->data()), static_cast<int32_t*>(scratch->data()), s,
                      rc::current_stream());
    if (!got.empty()) rc::copy_device_to_host(got.data(), out->data(), got.size() * 8);
  });
}

}  // namespace
}  // namespace flow

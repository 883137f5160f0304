// The GPU embedding_bag (runtime/embedding_bag_kernel.h): its source compiles with NVRTC for every
// architecture CUDA 13 targets, without local memory; its launch plan; and its text, run on the
// host SIMT emulator exactly as embedding_bag() launches it (and on a device where there is one),
// gives the serial result, bit for bit, for every weight type (float32, float64, float16,
// bfloat16), mode, padding_idx, per-sample weights, empty bags, NaN rows in max bags (their sign and payload kept),
// indices out of range (skipped) and boundaries out of order (clamped).
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
#include "dsl/interpreter.h"
#include "runtime/buffer.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_stream.h"
#include "runtime/device_error.h"
#include "runtime/embedding_bag_kernel.h"
#include "runtime/nvrtc.h"
#include "simt/simt_emulator.h"

namespace flow {
namespace {

namespace rc = runtime::cuda;
using rc::EmbeddingBagMode;
using rc::FixedKernelType;
using test::contains;

const std::vector<FixedKernelType> kTypes = {FixedKernelType::Float32, FixedKernelType::Float64,
                                             FixedKernelType::Float16, FixedKernelType::BFloat16};
const char* suffix(FixedKernelType t) {
  return rc::fixed_kernel_suffix(t);
}
size_t element_size(FixedKernelType t) {
  return t == FixedKernelType::Float64 ? 8 : t == FixedKernelType::Float32 ? 4 : 2;
}

// Element bytes <-> values, rounded to the type.
void put(FixedKernelType t, std::vector<uint8_t>& bytes, size_t i, double v) {
  uint8_t* p = bytes.data() + i * element_size(t);
  switch (t) {
    case FixedKernelType::Float32: {
      const auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case FixedKernelType::Float64:
      std::memcpy(p, &v, 8);
      break;
    default: {
      const uint16_t h = t == FixedKernelType::Float16 ? dsl::float_to_half_bits(static_cast<float>(v))
                                                       : dsl::float_to_bf16_bits(static_cast<float>(v));
      std::memcpy(p, &h, 2);
    }
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
    default: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return t == FixedKernelType::Float16 ? dsl::half_bits_to_float(h) : dsl::bf16_bits_to_float(h);
    }
  }
}

struct Problem {
  FixedKernelType type = FixedKernelType::Float32;
  rc::EmbeddingBagShape shape;
  std::vector<int64_t> indices, offsets;
  std::vector<uint8_t> weight, psw;
};

// Weights are multiples of 1/4 in [-8, 8] (exact in every type; sums and products exact in the
// float32 accumulator), with a NaN row or two for max bags.
Problem make_problem(FixedKernelType t, EmbeddingBagMode mode, bool padding, bool psw, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.type = t;
  p.shape.mode = mode;
  p.shape.dim = dim;
  p.shape.rows = 9;
  p.shape.padding_idx = padding ? 4 : -1;
  p.shape.per_sample_weights = psw;
  // Bags: lengths 0 to 6, one long bag, then boundaries out of order and past the end at the tail
  // (a kernel clamps them; the CPU raises).
  p.offsets = {0};
  for (int b = 0; b < 11; ++b) p.offsets.push_back(p.offsets.back() + static_cast<int64_t>(rng() % 7));
  p.offsets.push_back(p.offsets.back() + 40);
  p.shape.positions = p.offsets.back();
  p.offsets.push_back(p.offsets.back() - 5);   // a bag that ends before it starts: empty
  p.offsets.push_back(p.shape.positions + 3);  // past the end: clamped to the last positions
  p.shape.bags = static_cast<int64_t>(p.offsets.size()) - 1;
  for (int64_t i = 0; i < p.shape.positions; ++i) {
    int64_t ix = static_cast<int64_t>(rng() % 9);
    if (rng() % 17 == 0) ix = rng() % 2 ? -1 : 9;  // out of range: skipped
    p.indices.push_back(ix);
  }
  p.weight.resize(static_cast<size_t>(p.shape.rows * dim) * element_size(t));
  for (int64_t e = 0; e < p.shape.rows * dim; ++e)
    put(t, p.weight, static_cast<size_t>(e), (static_cast<int>(rng() % 65) - 32) / 4.0);
  if (mode == EmbeddingBagMode::Max) {  // a negative NaN with a payload, whose bits the kernel must keep
    const uint32_t bits = 0xFFD2C000u;
    float negative_nan;
    std::memcpy(&negative_nan, &bits, 4);
    put(t, p.weight, static_cast<size_t>(2 * dim + 1), negative_nan);
  }
  if (psw) {
    p.psw.resize(static_cast<size_t>(p.shape.positions) * element_size(t));
    for (int64_t i = 0; i < p.shape.positions; ++i)
      put(t, p.psw, static_cast<size_t>(i), (static_cast<int>(rng() % 9) - 4) / 4.0);
  }
  return p;
}

// The serial embedding_bag in the kernel's accumulator type (float; double for float64): each
// bag's positions in order, boundaries clamped, bad indices and padding skipped.
std::vector<double> expected(const Problem& p) {
  const rc::EmbeddingBagShape& s = p.shape;
  const bool f64 = p.type == FixedKernelType::Float64;
  std::vector<double> out;
  for (int64_t b = 0; b < s.bags; ++b) {
    const int64_t begin = std::clamp<int64_t>(p.offsets[b], 0, s.positions);
    const int64_t end = std::clamp<int64_t>(p.offsets[b + 1], begin, s.positions);
    for (int64_t c = 0; c < s.dim; ++c) {
      double acc = 0;
      int64_t counted = 0;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t ix = p.indices[static_cast<size_t>(i)];
        if (ix < 0 || ix >= s.rows || ix == s.padding_idx) continue;
        const double v = get(p.type, p.weight, static_cast<size_t>(ix * s.dim + c));
        if (s.mode == EmbeddingBagMode::Max) {
          if (counted == 0 || v > acc) acc = v;
        } else {
          acc += s.per_sample_weights ? get(p.type, p.psw, static_cast<size_t>(i)) * v : v;
        }
        ++counted;
      }
      if (s.mode == EmbeddingBagMode::Mean && counted > 0)
        acc = f64 ? acc / static_cast<double>(counted) : static_cast<float>(acc) / static_cast<float>(counted);
      out.push_back(acc);
    }
  }
  return out;
}

void check_embedding_bag(const std::function<void(const Problem&, std::vector<uint8_t>&)>& run) {
  uint32_t seed = 11;
  for (const FixedKernelType t : kTypes)
    for (const EmbeddingBagMode mode : {EmbeddingBagMode::Sum, EmbeddingBagMode::Mean, EmbeddingBagMode::Max})
      for (const bool padding : {false, true})
        for (const bool psw : {false, true})
          for (const int64_t dim : {int64_t{1}, int64_t{37}, int64_t{300}}) {  // one thread, a warp and a bit, > 256
            if (psw && mode != EmbeddingBagMode::Sum) continue;
            SCOPED_TRACE(std::string(suffix(t)) + " mode " + std::to_string(static_cast<int>(mode)) +
                         (padding ? " padding" : "") + (psw ? " per-sample weights" : "") + " dim " +
                         std::to_string(dim));
            const Problem p = make_problem(t, mode, padding, psw, dim, ++seed);
            std::vector<uint8_t> want_bytes(static_cast<size_t>(p.shape.bags * dim) * element_size(t));
            const std::vector<double> want = expected(p);
            for (size_t i = 0; i < want.size(); ++i) put(t, want_bytes, i, want[i]);  // rounded as stored
            // The output starts as NaN, then as zeros: an element left unwritten fails one of the two.
            for (const uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}}) {
              std::vector<uint8_t> out(want_bytes.size(), fill);
              run(p, out);
              for (size_t i = 0; i < want.size(); ++i) {
                const double w = get(t, want_bytes, i), got = get(t, out, i);
                if (std::isnan(w)) {  // the same NaN: sign and payload (the PTX conversions' canonical NaN fails)
                  const size_t size = element_size(t);
                  EXPECT_EQ(0, std::memcmp(out.data() + i * size, want_bytes.data() + i * size, size))
                      << "NaN bits of element " << i << " fill " << int{fill};
                } else {
                  EXPECT_EQ(got, w) << "element " << i << " fill " << int{fill};
                }
              }
            }
          }
}

// `word` holds one of the problem's real faults: a bad index at its position, or a bad boundary.
void expect_a_true_report(const Problem& p, const std::array<long long, 4>& word) {
  const auto code = static_cast<rc::DeviceErrorCode>(word[0]);
  if (code == rc::DeviceErrorCode::EmbeddingBagIndex) {
    ASSERT_GE(word[1], 0);
    ASSERT_LT(word[1], p.shape.positions);
    EXPECT_EQ(p.indices[static_cast<size_t>(word[1])], word[2]);
    EXPECT_TRUE(word[2] < 0 || word[2] >= p.shape.rows) << word[2];
    EXPECT_EQ(word[3], p.shape.rows);
  } else {
    ASSERT_EQ(code, rc::DeviceErrorCode::EmbeddingBagOffset) << word[0];
    const auto b = static_cast<size_t>(word[1]);
    ASSERT_LT(b, p.offsets.size());
    EXPECT_EQ(p.offsets[b], word[2]);
    EXPECT_TRUE(p.offsets[b] > p.shape.positions || (b > 0 && p.offsets[b] < p.offsets[b - 1])) << b;
    EXPECT_EQ(word[3], p.shape.positions);
  }
}

TEST(EmbeddingBagKernel, CompilesForEveryArchWithoutLocalMemory) {
  FLOW_REQUIRE_NVRTC();
  for (const char* arch : {"sm_75", "sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    const runtime::NvrtcResult r =
        runtime::nvrtc_compile(rc::embedding_bag_kernel_source(), "flow_embedding_bag_test", arch, {}, {});
    EXPECT_FALSE(r.cubin.empty());
    for (const FixedKernelType t : kTypes)
      EXPECT_TRUE(contains(r.ptx, std::string(".entry flow_embedding_bag_") + suffix(t) + "("));
    EXPECT_FALSE(contains(r.ptx, ".local")) << "local memory in the embedding_bag kernel";
    // One thread owns each output element: the only atomic is the error word's claim.
    size_t atomics = 0, claims = 0;
    for (size_t at = r.ptx.find("atom."); at != std::string::npos; at = r.ptx.find("atom.", at + 1)) ++atomics;
    for (size_t at = r.ptx.find("atom.global.cas.b64"); at != std::string::npos;
         at = r.ptx.find("atom.global.cas.b64", at + 1))
      ++claims;
    EXPECT_GT(claims, 0u);
    EXPECT_EQ(atomics, claims) << "an atomic other than the error word's claim";
  }
}

TEST(EmbeddingBagKernel, PlanCoversTheRowWithUpTo256Threads) {
  rc::EmbeddingBagShape s;
  s.bags = 70000;
  s.dim = 37;
  auto plan = rc::plan_embedding_bag(FixedKernelType::BFloat16, s);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].entry, "flow_embedding_bag_bf16");
  EXPECT_EQ(plan[0].threads, 64u);    // a whole number of warps covering 37 columns
  EXPECT_EQ(plan[0].blocks, 65535u);  // the kernel loops over the remaining bags
  s.dim = 1000;
  s.bags = 3;
  plan = rc::plan_embedding_bag(FixedKernelType::Float32, s);
  EXPECT_EQ(plan[0].threads, 256u);
  EXPECT_EQ(plan[0].blocks, 3u);
  s.bags = 0;
  EXPECT_TRUE(rc::plan_embedding_bag(FixedKernelType::Float32, s).empty());
  EXPECT_THROW(rc::plan_embedding_bag(FixedKernelType::Int64, s), std::invalid_argument);
}

// The kernel's text on the SIMT emulator (threads in a shuffled order), launched as embedding_bag()
// launches it.
TEST(EmbeddingBagKernel, RunsOnTheSimtEmulator) {
  std::vector<std::string> entries;
  for (const FixedKernelType t : kTypes) entries.push_back(std::string("flow_embedding_bag_") + suffix(t));
  const auto module = test::simt::module_for(rc::embedding_bag_kernel_source(), entries);
  // As planned (a block per bag), then with 3 blocks: each block loops over bags (grid-stride).
  for (const unsigned max_blocks : {65535u, 3u}) {
    SCOPED_TRACE("at most " + std::to_string(max_blocks) + " blocks");
    check_embedding_bag([&](const Problem& p, std::vector<uint8_t>& out) {
      rc::EmbeddingBagParams params = rc::embedding_bag_params(p.shape);
      void* out_ptr = out.data();
      const void* indices_ptr = p.indices.data();
      const void* weight_ptr = p.weight.data();
      const void* offsets_ptr = p.offsets.data();
      const void* psw_ptr = p.psw.empty() ? nullptr : p.psw.data();
      std::array<long long, 4> word{};
      long long* err = word.data();
      void* args[7] = {&out_ptr, &indices_ptr, &weight_ptr, &offsets_ptr, &psw_ptr, &params, &err};
      uint64_t seed = 3;
      for (const rc::EmbeddingBagLaunch& l : rc::plan_embedding_bag(p.type, p.shape))
        ASSERT_NO_THROW(module->launch(l.entry, {std::min(l.blocks, max_blocks)}, {l.threads}, args, ++seed))
            << module->source_path();
      // Every problem has boundaries out of order at its tail (and most an index out of range):
      // one of them is reported.
      expect_a_true_report(p, word);
    });
  }
}

TEST(EmbeddingBagKernelGpu, MatchesTheSerialEmbeddingBag) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_NVRTC();
  check_embedding_bag([](const Problem& p, std::vector<uint8_t>& out) {
    auto dev = [](size_t bytes) {
      return runtime::Buffer::allocate(std::max<size_t>(bytes, 1), runtime::DeviceType::CUDA);
    };
    auto o = dev(out.size()), ix = dev(p.indices.size() * 8), w = dev(p.weight.size()), off = dev(p.offsets.size() * 8),
         ps = dev(p.psw.size());
    rc::copy_host_to_device(o->data(), out.data(), out.size());
    rc::copy_host_to_device(ix->data(), p.indices.data(), p.indices.size() * 8);
    rc::copy_host_to_device(w->data(), p.weight.data(), p.weight.size());
    rc::copy_host_to_device(off->data(), p.offsets.data(), p.offsets.size() * 8);
    if (!p.psw.empty()) rc::copy_host_to_device(ps->data(), p.psw.data(), p.psw.size());
    rc::embedding_bag(p.type, o->data(), static_cast<const int64_t*>(ix->data()), w->data(),
                      static_cast<const int64_t*>(off->data()), p.psw.empty() ? nullptr : ps->data(), p.shape,
                      rc::current_stream());
    // The problem's bad data is reported at the first copy back (runtime/device_error.h), then reset.
    EXPECT_THROW(rc::copy_device_to_host(out.data(), o->data(), out.size()), std::runtime_error);
    rc::copy_device_to_host(out.data(), o->data(), out.size());
  });
}

}  // namespace
}  // namespace flow

namespace flow {
namespace {

// A clean problem but for one thing: a bad index is reported with its position, value and the row
// count; a first boundary other than 0 as boundary 0; torch's wording for both.
TEST(EmbeddingBagKernel, ReportsBadIndicesAndBoundaries) {
  const auto module = test::simt::module_for(rc::embedding_bag_kernel_source(), {"flow_embedding_bag_f32"});
  const auto run = [&](std::vector<int64_t> indices, std::vector<int64_t> offsets) {
    rc::EmbeddingBagShape s;
    s.bags = static_cast<int64_t>(offsets.size()) - 1;
    s.dim = 40;
    s.rows = 5;
    s.positions = static_cast<int64_t>(indices.size());
    std::vector<float> weight(static_cast<size_t>(s.rows * s.dim), 1.0f), out(static_cast<size_t>(s.bags * s.dim));
    rc::EmbeddingBagParams params = rc::embedding_bag_params(s);
    std::array<long long, 4> word{};
    void* out_ptr = out.data();
    const void* ix = indices.data();
    const void* w = weight.data();
    const void* off = offsets.data();
    const void* psw = nullptr;
    long long* err = word.data();
    void* args[7] = {&out_ptr, &ix, &w, &off, &psw, &params, &err};
    for (const rc::EmbeddingBagLaunch& l : rc::plan_embedding_bag(FixedKernelType::Float32, s))
      module->launch(l.entry, {l.blocks}, {l.threads}, args, 5);
    return word;
  };
  auto word = run({0, 1, 7, 2}, {0, 2, 4});
  EXPECT_EQ(word, (std::array<long long, 4>{1, 2, 7, 5}));
  EXPECT_NE(rc::device_error_message(word[0], word[1], word[2], word[3])
                .find("Index 2 of input takes value 7 which is not in the valid range [0, 5)"),
            std::string::npos);
  word = run({0, 1, 2, 3}, {1, 2, 4});
  EXPECT_EQ(word, (std::array<long long, 4>{2, 0, 1, 4}));
  EXPECT_EQ(run({0, 1, 2, 3}, {0, 2, 4}), (std::array<long long, 4>{}));  // nothing to report
}

}  // namespace
}  // namespace flow

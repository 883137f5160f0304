// Tests for runtime/: the thread pool (coverage, nesting, exceptions, the C ABI), buffers, dynamic
// loading, and NVRTC (which runs without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_util.h"
#include "runtime/buffer.h"
#include "runtime/cuda_driver.h"
#include "runtime/dynlib.h"
#include "runtime/nvrtc.h"
#include "runtime/parallel.h"
#include "runtime/parallel_abi.h"
#include "runtime/thread_pool.h"
#include "test_util.h"

namespace flow::runtime {
namespace {

// Runs `run` (a parallel_for over n) and checks that every index was visited exactly once, by
// contiguous, non-empty ranges that tile [0, n), at most `threads` of them, of sizes that differ by
// at most one.
template <typename Run>
void check_covers_with(const Run& run, int threads, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::mutex sizes_mutex;
  std::vector<int64_t> sizes;
  run(n, [&](int64_t begin, int64_t end) {
    ASSERT_LT(begin, end);
    ASSERT_GE(begin, 0);
    ASSERT_LE(end, n);
    {
      const std::lock_guard<std::mutex> lock(sizes_mutex);
      sizes.push_back(end - begin);
    }
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " index " << i;
  EXPECT_LE(static_cast<int64_t>(sizes.size()), std::max<int64_t>(1, std::min<int64_t>(n, threads)));
  if (n == 0) {
    EXPECT_TRUE(sizes.empty());
  } else {
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    EXPECT_LE(*hi - *lo, 1) << "n=" << n;
  }
}

void check_covers(ThreadPool& pool, int64_t n) {
  check_covers_with([&](int64_t m, const std::function<void(int64_t, int64_t)>& fn) { pool.parallel_for(m, fn); },
                    pool.num_threads(), n);
}

TEST(ThreadPool, CoversEachIndexExactlyOnce) {
  for (const int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (const int64_t n : {0, 1, 2, 3, 5, 7, 8, 9, 31, 64, 101, 1000, 4097, 100003}) check_covers(pool, n);
  }
}

TEST(ThreadPool, RandomSizesBackToBack) {
  auto rng = flow::test::rng(1);
  ThreadPool pool(4);
  for (int iter = 0; iter < 2000; ++iter) {
    const int64_t n = static_cast<int64_t>(rng() % 300);
    check_covers(pool, n);
  }
}

TEST(ThreadPool, RangesAreBalancedAndContiguous) {
  ThreadPool pool(4);
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(10, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(m);
    ranges.emplace_back(b, e);
  });
  std::sort(ranges.begin(), ranges.end());
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 3}, {3, 6}, {6, 8}, {8, 10}};
  EXPECT_EQ(ranges, want);
}

TEST(ThreadPool, NestedCallsRunSeriallyWithoutDeadlock) {
  ThreadPool pool(4);
  constexpr int64_t kOuter = 16, kInner = 37;
  std::vector<std::atomic<int>> hits(kOuter * kInner);
  std::atomic<int> nested_in_region{0};
  pool.parallel_for(kOuter, [&](int64_t ob, int64_t oe) {
    for (int64_t o = ob; o < oe; ++o) {
      int inner_calls = 0;
      pool.parallel_for(kInner, [&](int64_t ib, int64_t ie) {
        ++inner_calls;  // serial: no synchronization needed
        if (ThreadPool::in_parallel_region()) nested_in_region.fetch_add(1);
        for (int64_t i = ib; i < ie; ++i) hits[static_cast<size_t>(o * kInner + i)].fetch_add(1);
      });
      EXPECT_EQ(inner_calls, 1);  // the nested loop ran as one serial range
    }
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_EQ(nested_in_region.load(), kOuter);
  EXPECT_FALSE(ThreadPool::in_parallel_region());
}

TEST(ThreadPool, NestedAcrossTheGlobalPoolAndTheCAbi) {
  std::atomic<int64_t> sum{0};
  parallel_for(8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      struct Ctx {
        std::atomic<int64_t>* sum;
        int64_t base;
      } ctx{&sum, i * 100};
      flow_parallel_for(
          100,
          [](void* c, int64_t ib, int64_t ie) {
            auto* x = static_cast<Ctx*>(c);
            for (int64_t k = ib; k < ie; ++k) x->sum->fetch_add(x->base + k);
          },
          &ctx);
    }
  });
  EXPECT_EQ(sum.load(), 800 * 799 / 2);
}

TEST(ThreadPool, ExceptionsPropagateAndThePoolStaysUsable) {
  ThreadPool pool(4);
  for (int round = 0; round < 50; ++round) {
    const int64_t bad = round % 10;
    try {
      pool.parallel_for(10, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          if (i == bad) throw std::runtime_error("boom at " + std::to_string(i));
        }
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "boom at " + std::to_string(bad));
    }
    check_covers(pool, 1000);  // the next job is unaffected
  }
  // Serial path (n == 1, and a pool without workers) propagates too.
  EXPECT_THROW(pool.parallel_for(1, [](int64_t, int64_t) { throw std::logic_error("x"); }), std::logic_error);
  ThreadPool serial(1);
  EXPECT_THROW(serial.parallel_for(5, [](int64_t, int64_t) { throw std::logic_error("x"); }), std::logic_error);
}

TEST(ThreadPool, ConcurrentCallersFromOutsideThreads) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int iter = 0; iter < 200; ++iter) {
        const int64_t n = 1 + (t * 131 + iter * 17) % 500;
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (auto& h : hits) {
          if (h.load() != 1) failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(failures.load(), 0);
}

// The process's parallel backend (OpenMP next to an OpenMP oneDNN, else the global ThreadPool)
// keeps the ThreadPool's contract.
TEST(ParallelBackend, CoversEachIndexExactlyOnce) {
  const std::string backend = parallel_backend();
  EXPECT_TRUE(backend == "openmp" || backend == "flow") << backend;
  auto rng = flow::test::rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const int64_t n = iter < 12 ? iter : static_cast<int64_t>(rng() % 5000);
    check_covers_with([](int64_t m, const std::function<void(int64_t, int64_t)>& fn) { parallel_for(m, fn); },
                      num_threads(), n);
  }
}

TEST(ParallelBackend, ExceptionsPropagateAndNestedCallsRunSerially) {
  for (int round = 0; round < 20; ++round) {
    const int64_t bad = round % 7;
    try {
      parallel_for(7, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          if (i == bad) throw std::runtime_error("boom at " + std::to_string(i));
        }
      });
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "boom at " + std::to_string(bad));
    }
  }
  std::atomic<int> inner_calls{0};
  std::atomic<int64_t> sum{0};
  parallel_for(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      parallel_for(50, [&](int64_t ib, int64_t ie) {
        inner_calls.fetch_add(1);  // serial: one call covering all 50
        for (int64_t k = ib; k < ie; ++k) sum.fetch_add(k);
      });
    }
  });
  EXPECT_EQ(inner_calls.load(), 4);
  EXPECT_EQ(sum.load(), 4 * (50 * 49 / 2));
}

TEST(ThreadPool, GlobalPoolHonoursAtLeastOneThread) {
  EXPECT_GE(num_threads(), 1);
  EXPECT_EQ(num_threads(), global_thread_pool().num_threads());
  EXPECT_EQ(num_threads(), threads_from_env());
  ThreadPool clamped(0);
  EXPECT_EQ(clamped.num_threads(), 1);
}

TEST(Buffer, AlignedSizedAndOwned) {
  for (const size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, size_t{1} << 20}) {
    auto b = Buffer::allocate(bytes);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->size(), bytes);
    EXPECT_EQ(b->device(), DeviceType::CPU);
    ASSERT_NE(b->data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % Buffer::kAlignment, 0u) << bytes;
    // The whole requested range is writable and readable.
    auto* p = b->data_as<unsigned char>();
    for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 7);
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7));
  }
  EXPECT_STREQ(device_type_name(DeviceType::CUDA), "cuda");
}

// Large host blocks are cached on release and handed out most recently freed first (the block
// likeliest to still be in cache), for any request within a quarter above.
TEST(Buffer, HostCacheReusesTheMostRecentlyFreedBlock) {
  release_cached_host_memory();
  const size_t bytes = size_t{3} << 20;
  auto first = Buffer::allocate(bytes), second = Buffer::allocate(bytes);
  const void* first_ptr = first->data();
  const void* second_ptr = second->data();
  first.reset();
  second.reset();
  EXPECT_GE(cached_host_bytes(), 2 * bytes);
  auto again = Buffer::allocate(bytes - 4096);
  EXPECT_EQ(again->data(), second_ptr);
  auto next = Buffer::allocate(bytes);
  EXPECT_EQ(next->data(), first_ptr);
  release_cached_host_memory();
}

TEST(Buffer, CudaAllocationWorksOrIsAClearError) {
  if (flow::runtime::cuda::cuda_available()) {
    auto b = Buffer::allocate(16, DeviceType::CUDA);
    EXPECT_EQ(b->device(), DeviceType::CUDA);
    return;
  }
  try {
    Buffer::allocate(16, DeviceType::CUDA);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
}

TEST(DynamicLibrary, MissingLibraryNamesItAndTheNamesTried) {
  try {
    DynamicLibrary::open_first("the bogus library", {"libflow_bogus_a.so.1", "/nonexistent/libflow_bogus_b.so"});
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the bogus library"), std::string::npos) << what;
    EXPECT_NE(what.find("libflow_bogus_a.so.1"), std::string::npos) << what;
    EXPECT_NE(what.find("/nonexistent/libflow_bogus_b.so"), std::string::npos) << what;
    EXPECT_NE(what.find("cannot open shared object file"), std::string::npos) << what;  // dlerror()
  }
  EXPECT_THROW(DynamicLibrary("libflow_bogus_c.so"), std::runtime_error);
}

TEST(DynamicLibrary, SymbolsFromLibc) {
  const DynamicLibrary libc("libc.so.6");
  using StrlenFn = size_t (*)(const char*);
  EXPECT_EQ(libc.function<StrlenFn>("strlen")("flow"), 4u);
  EXPECT_EQ(libc.find_symbol("flow_no_such_symbol"), nullptr);
  try {
    libc.symbol("flow_no_such_symbol");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("flow_no_such_symbol"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("libc.so.6"), std::string::npos);
  }
  DynamicLibrary moved = DynamicLibrary("libc.so.6");
  EXPECT_NE(moved.find_symbol("strlen"), nullptr);
}

TEST(DynamicLibrary, CudaCandidates) {
  // The default order, without FLOW_CUDA_LIB_PATH (tools/gpu_check.sh sets it; test_cuda_libs
  // checks what it adds).
  const char* lib_path = std::getenv("FLOW_CUDA_LIB_PATH");
  const std::string saved = lib_path ? lib_path : "";
  ::unsetenv("FLOW_CUDA_LIB_PATH");
  const auto nvrtc = cuda_library_candidates(CudaLib::Nvrtc);
  if (lib_path) ::setenv("FLOW_CUDA_LIB_PATH", saved.c_str(), 1);
  ASSERT_GE(nvrtc.size(), 6u);
  EXPECT_EQ(nvrtc[0], "libnvrtc.so.13");
  EXPECT_EQ(nvrtc[1], "libnvrtc.so.12");
  EXPECT_EQ(nvrtc[2], "libnvrtc.so");
  EXPECT_NE(std::find(nvrtc.begin(), nvrtc.end(), "/usr/local/cuda/lib64/libnvrtc.so.13"), nvrtc.end());
  const auto driver = cuda_library_candidates(CudaLib::Driver);
  for (const auto& d : driver) EXPECT_EQ(d.find('/'), std::string::npos) << "never a stub by path: " << d;
}

constexpr const char* kScaleKernel = R"(
#include "flow_test_helper.h"
extern "C" __global__ void flow_scale(float* __restrict__ out, const float* __restrict__ in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = twice(in[i]);
}
)";

TEST(Nvrtc, CompilesToPtxAndCubin) {
  FLOW_REQUIRE_NVRTC();  // NVRTC tests run wherever a toolkit is (no GPU needed)
  const std::string version = nvrtc_version();
  EXPECT_EQ(version.rfind("nvrtc-", 0), 0u) << version;
  const NvrtcResult r =
      nvrtc_compile(kScaleKernel, "flow_scale", "sm_90", {"--std=c++17"},
                    {{"flow_test_helper.h", "__device__ inline float twice(float x) { return 2.0f * x; }\n"}});
  EXPECT_NE(r.ptx.find(".entry flow_scale"), std::string::npos) << r.ptx.substr(0, 400);
  EXPECT_NE(r.ptx.find(".target sm_90"), std::string::npos);
  ASSERT_GE(r.cubin.size(), 4u);
  EXPECT_EQ(r.cubin.substr(0, 4), std::string("\x7f"
                                              "ELF"));  // a cubin is an ELF image
  EXPECT_EQ(r.ptx.find('\0'), std::string::npos);

  const NvrtcResult virt =
      nvrtc_compile(kScaleKernel, "flow_scale", "compute_90", {},
                    {{"flow_test_helper.h", "__device__ inline float twice(float x) { return x + x; }\n"}});
  EXPECT_NE(virt.ptx.find(".entry flow_scale"), std::string::npos);
  EXPECT_TRUE(virt.cubin.empty());
  EXPECT_THROW(nvrtc_compile(kScaleKernel, "k", "gfx90a", {}, {}), std::invalid_argument);
}

TEST(Nvrtc, SyntaxErrorRaisesWithLogAndSavedSource) {
  FLOW_REQUIRE_NVRTC();  // NVRTC tests run wherever a toolkit is (no GPU needed)
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / ("flow_test_dump_" + std::to_string(flow::test::rng(2)()));
  ::setenv("FLOW_DUMP_DIR", dump.c_str(), 1);
  const std::string source = "extern \"C\" __global__ void broken(float* x) { x[0] = 1.0f  }  // flow_marker\n";
  try {
    nvrtc_compile(source, "broken kernel", "sm_90", {}, {});
    FAIL() << "no exception";
  } catch (const NvrtcError& e) {
    const std::string what = e.what();
    EXPECT_FALSE(e.log().empty());
    EXPECT_NE(e.log().find("error"), std::string::npos) << e.log();
    EXPECT_NE(what.find(e.log()), std::string::npos) << "what() includes the log";
    ASSERT_FALSE(e.source_path().empty());
    EXPECT_NE(what.find(e.source_path()), std::string::npos) << "what() includes the saved path";
    EXPECT_EQ(std::filesystem::path(e.source_path()).parent_path(), dump);
    EXPECT_NE(e.source_path().find("flow_nvrtc_broken_kernel_"), std::string::npos) << e.source_path();
    ASSERT_TRUE(std::filesystem::exists(e.source_path()));
    std::ifstream f(e.source_path());
    std::stringstream saved;
    saved << f.rdbuf();
    EXPECT_EQ(saved.str().rfind(source, 0), 0u) << "the saved file starts with the exact source";
  }
  ::unsetenv("FLOW_DUMP_DIR");
  std::filesystem::remove_all(dump);
}

}  // namespace
}  // namespace flow::runtime

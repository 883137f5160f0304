// The CUDA runtime: driver loading, allocator, copies, streams and events, and launching kernels of
// the pipeline (scheduled for Target::CUDA, compiled by NVRTC) on random data against a CPU
// reference. Without a GPU the error paths, size classes, launch shapes and symbol names are
// checked; the tests that need a device skip with "no CUDA device" when cuda_available() is false.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "jit/compile.h"
#include "jit/cuda/cuda_compile.h"
#include "jit/cuda_launch.h"
#include "jit/eager.h"
#include "runtime/buffer.h"
#include "runtime/cuda_allocator.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_graph.h"
#include "runtime/cuda_stream.h"
#include "runtime/dynlib.h"
#include "scheduler/fusion.h"
#include "test_util.h"

using namespace flow;
using dsl::DType;
namespace rc = flow::runtime::cuda;
using runtime::Buffer;
using runtime::DeviceType;

namespace {

using test::contains;

dsl::Graph chain_graph(int64_t n) {
  dsl::Graph g;
  const int x = g.add_input({{n}, DType::Float32}, "x");
  const int a = g.add_input({{n}, DType::Float32}, "a");
  const int b = g.add_input({{n}, DType::Float32}, "b");
  const int xa = g.add("mul", {x, a});
  const int xab = g.add("add", {xa, b});
  const int r = g.add("relu", {xab});
  const int s = g.add("sigmoid", {x});
  const int m = g.add("mul", {r, s});
  const int one = g.add_constant(1.0, DType::Float64, true);
  g.mark_output(g.add("add", {m, one}));
  return g;
}

float chain_ref(float x, float a, float b) {
  return std::max(0.f, x * a + b) * (1.f / (1.f + std::exp(-x))) + 1.f;
}

dsl::Graph softmax_graph(int64_t rows, int64_t cols) {
  dsl::Graph g;
  const int x = g.add_input({{rows, cols}, DType::Float32}, "x");
  g.mark_output(g.add("softmax", {x}, {{"dim", int64_t{-1}}}));
  return g;
}

// The one kernel of a single-group graph, scheduled for the GPU.
sched::ScheduledKernel schedule_gpu(const dsl::Graph& g, bool inline_constants = true,
                                    const sched::GroupLayouts& layouts = {}) {
  const sched::FusionPlan plan = sched::fuse(g);
  EXPECT_EQ(plan.groups.size(), 1u);
  const auto ki = sched::specialize(g, plan.groups.at(0), layouts, inline_constants);
  const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
  return s.schedule(ki, s.heuristics(ki, dsl::Target::CUDA), dsl::Target::CUDA);
}

std::vector<float> random_floats(size_t n, std::mt19937_64& rng, float lo = -3.f, float hi = 3.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A contiguous CUDA float tensor holding `host`.
jit::Tensor to_device(const std::vector<float>& host, const dsl::Shape& shape) {
  jit::Tensor t;
  t.sizes = shape;
  t.strides = jit::contiguous_strides_of(shape);
  t.dtype = DType::Float32;
  t.storage = Buffer::allocate(host.size() * sizeof(float), DeviceType::CUDA);
  rc::copy_host_to_device(t.storage->data(), host.data(), host.size() * sizeof(float));
  return t;
}

// A CUDA float tensor full of NaN (0xFF bytes): elements a kernel fails to write stay NaN.
jit::Tensor poisoned_device(const dsl::Shape& shape) {
  jit::Tensor t;
  t.sizes = shape;
  t.strides = jit::contiguous_strides_of(shape);
  t.dtype = DType::Float32;
  const size_t bytes = static_cast<size_t>(dsl::numel(shape)) * sizeof(float);
  t.storage = Buffer::allocate(bytes, DeviceType::CUDA);
  rc::memset_device(t.storage->data(), 0xFF, bytes);
  return t;
}

std::vector<float> to_host(const jit::Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  rc::copy_device_to_host(out.data(), t.data(), out.size() * sizeof(float));
  return out;
}

jit::CompileOptions gpu_options() {
  jit::CompileOptions opt;
  opt.target = dsl::Target::CUDA;
  opt.cuda_arch = rc::device_props(rc::current_device()).arch;
  return opt;
}

// Binds graph inputs (in order) and the output to a value-id-indexed table.
std::vector<const jit::Tensor*> bind(const dsl::Graph& g, const std::vector<const jit::Tensor*>& inputs,
                                     const jit::Tensor* output) {
  std::vector<const jit::Tensor*> values(g.values().size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) values[g.inputs()[i]] = inputs[i];
  values[g.outputs()[0]] = output;
  return values;
}

}  // namespace

// ---- without a GPU too ----------------------------------------------------------------------------

TEST(CudaRuntime, UnavailableIsAClearErrorNotACrash) {
  EXPECT_EQ(rc::cuda_available(), rc::cuda_available());  // stable, never throws
  if (rc::cuda_available()) {
    EXPECT_GT(rc::device_count(), 0);
    EXPECT_TRUE(rc::unavailable_reason().empty());
    try {
      rc::device_props(rc::device_count());
      FAIL() << "no exception for an out-of-range device";
    } catch (const rc::CudaError& e) {
      EXPECT_TRUE(contains(e.what(), "out of range")) << e.what();
    }
    return;
  }
  EXPECT_EQ(rc::device_count(), 0);
  const std::string reason = rc::unavailable_reason();
  EXPECT_TRUE(contains(reason, "driver")) << reason;
  auto expect_driver_error = [](const char* what, auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << what << ": no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(contains(e.what(), "CUDA is not available")) << what << ": " << e.what();
      EXPECT_TRUE(contains(e.what(), "driver")) << what << ": " << e.what();
    }
  };
  expect_driver_error("device_props", [] { rc::device_props(0); });
  expect_driver_error("Buffer::allocate", [] { Buffer::allocate(16, DeviceType::CUDA); });
  expect_driver_error("allocator", [] { rc::current_allocator().allocate(16); });
  expect_driver_error("current_stream", [] { rc::current_stream(); });
  expect_driver_error("EventTimer", [] { rc::EventTimer t; });
  expect_driver_error("CudaModule", [] { rc::CudaModule m("not a cubin"); });
  expect_driver_error("set_device", [] { rc::set_device(0); });
  expect_driver_error("copy", [] {
    char c = 0;
    rc::copy_host_to_device(&c, &c, 1);
  });
  try {
    rc::require_cuda();
    FAIL() << "no exception";
  } catch (const rc::CudaError& e) {
    EXPECT_EQ(e.code(), -1);
  }
}

// Every entry point flow resolves exists under that exact (versioned) name in the toolkit's
// link stub of libcuda, which exports the driver's whole API. The stub is only dlopen'ed here, to
// read its symbol table; nothing is called.
TEST(CudaRuntime, DriverSymbolNamesExistInTheToolkitStub) {
  const std::vector<std::string> names = rc::driver_symbol_names();
  if (names.empty()) GTEST_SKIP() << "built without cuda.h";
  EXPECT_TRUE(std::find(names.begin(), names.end(), "cuMemAlloc_v2") != names.end());
  EXPECT_TRUE(std::find(names.begin(), names.end(), "cuDevicePrimaryCtxRetain") != names.end());
  // CUDA graphs (runtime/cuda_graph.h), by the names cuda.h maps them to.
  for (const char* n : {"cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuStreamIsCapturing",
                        "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy"})
    EXPECT_TRUE(std::find(names.begin(), names.end(), n) != names.end()) << n;
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/lib64/stubs");
  dirs.push_back("/usr/local/cuda/lib64/stubs");
  std::string stub;
  for (const auto& d : dirs)
    if (std::filesystem::exists(d + "/libcuda.so")) {
      stub = d + "/libcuda.so";
      break;
    }
  if (stub.empty()) GTEST_SKIP() << "no CUDA toolkit stub libcuda.so to check the names against";
  const runtime::DynamicLibrary lib(stub);
  for (const auto& n : names) EXPECT_NE(lib.find_symbol(n.c_str()), nullptr) << n << " is not in " << stub;
}

TEST(CudaAllocator, SizeClassesBoundWasteAndAreStable) {
  using A = rc::CudaCachingAllocator;
  EXPECT_EQ(A::round_size(0), 512u);
  EXPECT_EQ(A::round_size(1), 512u);
  EXPECT_EQ(A::round_size(512), 512u);
  EXPECT_EQ(A::round_size(513), 1024u);
  EXPECT_EQ(A::round_size(size_t{1} << 20), size_t{1} << 20);
  EXPECT_EQ(A::round_size((size_t{1} << 20) + 1), (size_t{9} << 20) / 8);
  auto rng = test::rng(11);
  std::uniform_int_distribution<size_t> dist(1, size_t{1} << 34);
  for (int i = 0; i < 20000; ++i) {
    const size_t n = i < 5000 ? static_cast<size_t>(i) * 977 : dist(rng) >> (i % 24);
    const size_t r = A::round_size(n);
    ASSERT_GE(r, n);
    ASSERT_EQ(r % 512, 0u) << n;
    ASSERT_EQ(A::round_size(r), r) << n;  // a class is its own class
    if (n > 4096) {
      ASSERT_LE(r - n, n / 8) << n;
    }
  }
}

TEST(CudaLaunch, ShapeComesFromTheScalarArgsOfEachLaunch) {
  const dsl::Graph g_small = chain_graph(3001), g_big = chain_graph(100003), g_empty = chain_graph(0);
  const auto small = schedule_gpu(g_small), big = schedule_gpu(g_big), empty = schedule_gpu(g_empty);
  // One kernel serves every size: evaluate the small kernel's shape with the other launches' args.
  const auto s_small = jit::cuda_launch_shape(small.func, small.args);
  const auto s_big = jit::cuda_launch_shape(small.func, big.args);
  const auto s_empty = jit::cuda_launch_shape(small.func, empty.args);
  EXPECT_FALSE(s_small.empty());
  EXPECT_GT(s_big.grid[0] * s_big.grid[1] * s_big.grid[2], s_small.grid[0] * s_small.grid[1] * s_small.grid[2]);
  EXPECT_EQ(s_big.block, s_small.block);
  EXPECT_TRUE(s_empty.empty());
  for (int d = 0; d < 3; ++d) {
    EXPECT_GE(s_small.block[d], 1);
    EXPECT_LE(s_small.block[d], 1024);
  }
  // Softmax: every row is covered by at least one block.
  const auto sm = schedule_gpu(softmax_graph(37, 333));
  const auto s_sm = jit::cuda_launch_shape(sm.func, sm.args);
  EXPECT_GE(s_sm.grid[0] * s_sm.grid[1] * s_sm.grid[2], 1);
  EXPECT_FALSE(s_sm.empty());
  // An empty launch needs no device, no binary and no buffers.
  EXPECT_NO_THROW(jit::launch_cuda_func(small.func, "empty", "", empty.args, {}));
  // Mismatched arguments are an error naming the kernel.
  auto bad_args = small.args;
  bad_args.pop_back();
  try {
    jit::cuda_launch_shape(small.func, bad_args);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), small.func.name)) << e.what();
  }
}

TEST(CudaLaunch, HostTensorIsRejectedBeforeAnyDriverCall) {
  const dsl::Graph g = chain_graph(64);
  const auto sk = schedule_gpu(g);
  std::vector<jit::Tensor> host;
  for (int i = 0; i < 4; ++i) host.push_back(jit::Tensor::empty({64}, DType::Float32));
  const auto values = bind(g, {&host[0], &host[1], &host[2]}, &host[3]);
  try {
    jit::launch_cuda_func(sk.func, "host", "", sk.args, values);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "cpu tensor")) << e.what();
  }
}

TEST(CudaCopy, HostToHostCopyNeedsNoDriver) {
  std::vector<int> a = {1, 2, 3, 4}, b(4, 0);
  runtime::copy_bytes(b.data(), DeviceType::CPU, a.data(), DeviceType::CPU, sizeof(int) * 4);
  EXPECT_EQ(a, b);
  EXPECT_NO_THROW(runtime::copy_bytes(nullptr, DeviceType::CUDA, nullptr, DeviceType::CPU, 0));
}

// ---- with a GPU ------------------------------------------------------------------------------------

TEST(CudaRuntime, DevicePropsDescribeTheDevice) {
  FLOW_REQUIRE_GPU();
  const rc::DeviceProps& p = rc::device_props(0);
  std::printf("[flow] device 0: %s, %s, %d SMs, %lld MiB, driver %d\n", p.name.c_str(), p.arch.c_str(), p.sm_count,
              static_cast<long long>(p.total_memory >> 20), rc::driver_version());
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(p.arch, "sm_" + std::to_string(p.major) + std::to_string(p.minor));
  EXPECT_GE(p.major, 5);
  EXPECT_GT(p.sm_count, 0);
  EXPECT_EQ(p.warp_size, 32);
  EXPECT_GE(p.max_threads_per_block, 1024);
  EXPECT_GE(p.shared_per_block, 48 * 1024);
  EXPECT_GE(p.shared_per_block_optin, p.shared_per_block);
  EXPECT_GT(p.total_memory, int64_t{1} << 30);
  const auto [free_b, total_b] = rc::memory_info();
  EXPECT_LE(free_b, total_b);
  EXPECT_EQ(&rc::device_props(0), &p);  // cached
}

TEST(CudaAllocator, FreedBlocksAreReusedAndCounted) {
  FLOW_REQUIRE_GPU();
  rc::CudaCachingAllocator& alloc = rc::current_allocator();
  alloc.empty_cache();
  const rc::AllocatorStats s0 = alloc.stats();
  EXPECT_EQ(s0.cached, 0u);
  void* p1 = alloc.allocate(1000);
  ASSERT_NE(p1, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p1) % 256, 0u);
  rc::AllocatorStats s1 = alloc.stats();
  EXPECT_EQ(s1.allocated, s0.allocated + 1024);
  EXPECT_EQ(s1.device_allocs, s0.device_allocs + 1);
  EXPECT_GE(s1.peak, s1.allocated);
  alloc.free(p1);
  rc::AllocatorStats s2 = alloc.stats();
  EXPECT_EQ(s2.allocated, s0.allocated);
  EXPECT_EQ(s2.cached, 1024u);
  void* p2 = alloc.allocate(1020);  // same size class
  EXPECT_EQ(p2, p1);
  rc::AllocatorStats s3 = alloc.stats();
  EXPECT_EQ(s3.device_allocs, s1.device_allocs);  // no new cuMemAlloc
  EXPECT_EQ(s3.cache_hits, s2.cache_hits + 1);
  EXPECT_EQ(s3.cached, 0u);
  void* p3 = alloc.allocate(5000);  // another class: a fresh block
  EXPECT_NE(p3, p1);
  alloc.free(p2);
  alloc.free(p3);
  EXPECT_EQ(alloc.stats().cached, 1024u + 5120u);
  EXPECT_EQ(alloc.empty_cache(), 1024u + 5120u);
  EXPECT_EQ(alloc.stats().cached, 0u);
  EXPECT_EQ(alloc.stats().reserved, s0.reserved);

  // Buffers go through the same allocator and return their block on release.
  auto b = Buffer::allocate(3 << 20, DeviceType::CUDA);
  EXPECT_EQ(b->device(), DeviceType::CUDA);
  EXPECT_EQ(b->device_index(), rc::current_device());
  EXPECT_EQ(b->size(), size_t{3} << 20);
  void* const data = b->data();
  b.reset();
  EXPECT_GE(alloc.stats().cached, size_t{3} << 20);
  auto b2 = Buffer::allocate(3 << 20, DeviceType::CUDA);
  EXPECT_EQ(b2->data(), data);
  auto z = Buffer::allocate(0, DeviceType::CUDA);
  EXPECT_NE(z->data(), nullptr);
  EXPECT_EQ(Buffer::allocate(8)->device_index(), -1);
}

TEST(CudaCopy, RoundTripsThroughTheDevice) {
  FLOW_REQUIRE_GPU();
  auto rng = test::rng(21);
  const size_t n = (size_t{1} << 20) + 3;
  std::vector<unsigned char> src(n), back(n, 0);
  for (auto& c : src) c = static_cast<unsigned char>(rng());
  auto d1 = Buffer::allocate(n, DeviceType::CUDA);
  auto d2 = Buffer::allocate(n, DeviceType::CUDA);
  rc::copy_host_to_device(d1->data(), src.data(), n);
  rc::copy_device_to_device(d2->data(), d1->data(), n);
  rc::copy_device_to_host(back.data(), d2->data(), n);
  EXPECT_EQ(back, src);
  rc::memset_device(d2->data(), 0xAB, n - 7);
  runtime::copy_bytes(back.data(), DeviceType::CPU, d2->data(), DeviceType::CUDA, n);
  for (size_t i = 0; i < n - 7; ++i) ASSERT_EQ(back[i], 0xAB) << i;
  for (size_t i = n - 7; i < n; ++i) ASSERT_EQ(back[i], src[i]) << i;
  // Through an offset into the buffer, and a StreamGuard'ed stream.
  rc::CudaStream stream;
  {
    rc::StreamGuard guard(stream.get());
    EXPECT_EQ(rc::current_stream(), stream.get());
    rc::copy_host_to_device(static_cast<char*>(d1->data()) + 5, src.data(), 100);
    rc::copy_device_to_host(back.data(), static_cast<char*>(d1->data()) + 5, 100);
  }
  EXPECT_NE(rc::current_stream(), stream.get());
  EXPECT_EQ(std::memcmp(back.data(), src.data(), 100), 0);
}

TEST(CudaLaunch, PointwiseKernelMatchesTheCpu) {
  FLOW_REQUIRE_GPU();
  auto rng = test::rng(31);
  const jit::CompileOptions opt = gpu_options();
  for (bool inline_constants : {true, false}) {  // false: the constant 1.0 is a double parameter
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1031}, int64_t{4096}, int64_t{100003}}) {
      const dsl::Graph g = chain_graph(n);
      const auto sk = schedule_gpu(g, inline_constants);
      const auto k = jit::get_kernel(sk, opt);
      const auto x = random_floats(n, rng), a = random_floats(n, rng), b = random_floats(n, rng);
      const jit::Tensor tx = to_device(x, {n}), ta = to_device(a, {n}), tb = to_device(b, {n});
      const jit::Tensor out = poisoned_device({n});
      jit::launch_cuda(*k, sk.args, bind(g, {&tx, &ta, &tb}, &out));
      rc::synchronize();
      const auto got = to_host(out);
      for (int64_t i = 0; i < n; ++i) {
        const float ref = chain_ref(x[i], a[i], b[i]);
        ASSERT_NEAR(got[i], ref, 1e-5f * (1.f + std::fabs(ref)))
            << sk.func.name << " n=" << n << " i=" << i << " inline_constants=" << inline_constants;
      }
    }
  }
}

TEST(CudaLaunch, OneLoadPerKernelServesEveryShape) {
  FLOW_REQUIRE_GPU();
  auto rng = test::rng(32);
  const jit::CompileOptions opt = gpu_options();
  const dsl::Graph g0 = chain_graph(5000);
  const auto k = jit::get_kernel(schedule_gpu(g0), opt);
  size_t loaded = 0;
  for (int64_t n : {int64_t{5000}, int64_t{77}, int64_t{0}, int64_t{300001}}) {
    const dsl::Graph g = chain_graph(n);
    const auto sk = schedule_gpu(g);  // same loop nest, other scalar args
    const auto x = random_floats(n, rng), a = random_floats(n, rng), b = random_floats(n, rng);
    const jit::Tensor tx = to_device(x, {n}), ta = to_device(a, {n}), tb = to_device(b, {n});
    const jit::Tensor out = poisoned_device({n});
    jit::launch_cuda(*k, sk.args, bind(g, {&tx, &ta, &tb}, &out));
    if (n == 5000) loaded = jit::loaded_cuda_kernels();
    const auto got = to_host(out);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], chain_ref(x[i], a[i], b[i]), 1e-5f * (1.f + std::fabs(chain_ref(x[i], a[i], b[i]))))
          << "n=" << n << " i=" << i;
  }
  EXPECT_EQ(jit::loaded_cuda_kernels(), loaded);
}

TEST(CudaLaunch, SoftmaxReductionMatchesTheCpu) {
  FLOW_REQUIRE_GPU();
  auto rng = test::rng(33);
  const jit::CompileOptions opt = gpu_options();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {17, 4096}, {5, 1000}, {130, 333}, {2, 65537}}) {
    const dsl::Graph g = softmax_graph(rows, cols);
    const auto sk = schedule_gpu(g);
    const auto k = jit::get_kernel(sk, opt);
    const auto x = random_floats(rows * cols, rng, -8.f, 8.f);
    const jit::Tensor tx = to_device(x, {rows, cols});
    const jit::Tensor out = poisoned_device({rows, cols});
    jit::launch_cuda(*k, sk.args, bind(g, {&tx}, &out));
    const auto got = to_host(out);
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]));
      for (int64_t c = 0; c < cols; ++c) s += std::exp(double(x[r * cols + c]) - m);
      for (int64_t c = 0; c < cols; ++c) {
        const double ref = std::exp(double(x[r * cols + c]) - m) / s;
        ASSERT_NEAR(got[r * cols + c], ref, 1e-6 + 1e-5 * ref) << rows << "x" << cols << " at " << r << "," << c;
      }
    }
  }
}

TEST(CudaLaunch, NonContiguousInputUsesStrides) {
  FLOW_REQUIRE_GPU();
  auto rng = test::rng(34);
  const jit::CompileOptions opt = gpu_options();
  // x is the transpose of a contiguous [50, 90] tensor: logical [90, 50], strides [1, 90].
  const auto base = random_floats(50 * 90, rng);
  jit::Tensor xt = to_device(base, {50, 90});
  xt.sizes = {90, 50};
  xt.strides = {1, 90};
  dsl::Graph g;
  const int x = g.add_input({{90, 50}, DType::Float32});
  g.mark_output(g.add("exp", {x}));
  sched::GroupLayouts layouts;
  layouts[x] = xt.strides;
  const auto sk = schedule_gpu(g, true, layouts);
  const auto k = jit::get_kernel(sk, opt);
  const jit::Tensor out = poisoned_device({90, 50});
  jit::launch_cuda(*k, sk.args, bind(g, {&xt}, &out));
  const auto got = to_host(out);
  for (int64_t i = 0; i < 90; ++i)
    for (int64_t j = 0; j < 50; ++j) {
      const float ref = std::exp(base[j * 90 + i]);
      ASSERT_NEAR(got[i * 50 + j], ref, 1e-5f * ref) << i << "," << j;
    }
}

TEST(CudaStream, EventsTimeAKernel) {
  FLOW_REQUIRE_GPU();
  const int64_t n = 1 << 20;
  const dsl::Graph g = chain_graph(n);
  const auto sk = schedule_gpu(g);
  const auto k = jit::get_kernel(sk, gpu_options());
  std::vector<float> zeros(n, 0.f);
  const jit::Tensor tx = to_device(zeros, {n}), ta = to_device(zeros, {n}), tb = to_device(zeros, {n});
  const jit::Tensor out = poisoned_device({n});
  rc::EventTimer timer;
  EXPECT_THROW(timer.elapsed_ms(), std::logic_error);
  timer.start();
  jit::launch_cuda(*k, sk.args, bind(g, {&tx, &ta, &tb}, &out));
  timer.stop();
  const double ms = timer.elapsed_ms();
  EXPECT_GE(ms, 0.0);
  EXPECT_TRUE(std::isfinite(ms));
  // relu(0) * sigmoid(0) + 1 = 1 everywhere.
  const auto got = to_host(out);
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(got[i], 1.f) << i;
}

TEST(CudaLaunch, WrongArchitectureOrBadImageIsAClearError) {
  FLOW_REQUIRE_GPU();
  try {
    rc::CudaModule m("definitely not a cubin", "bogus");
    FAIL() << "no exception";
  } catch (const rc::CudaError& e) {
    EXPECT_TRUE(contains(e.what(), "cuModuleLoadData")) << e.what();
    EXPECT_TRUE(contains(e.what(), "CUDA_ERROR_")) << e.what();
  }
}

// The whole pipeline on the device: jit::compile for the CUDA target (NVRTC, kernel cache), an
// Executable run on CUDA tensors, and eager ops on CUDA tensors, against the CPU formula.
TEST(CudaExecutable, CompiledGraphAndEagerOpsRunOnTheDevice) {
  FLOW_REQUIRE_GPU();
  auto rng = flow::test::rng(77);
  const int64_t n = 100003;
  flow::dsl::Graph g;
  const int x = g.add_input({{n}, flow::dsl::DType::Float32});
  const int a = g.add_input({{n}, flow::dsl::DType::Float32});
  const int r = g.add("relu", {g.add("mul", {x, a})});
  g.mark_output(g.add("add", {r, g.add_constant(1.0, flow::dsl::DType::Float64, true)}));
  flow::jit::CompileOptions opt;
  opt.target = flow::dsl::Target::CUDA;
  opt.cuda_arch = flow::jit::default_cuda_arch();
  auto exe = flow::jit::compile(g, {}, opt);
  ASSERT_EQ(exe->num_kernels(), 1);
  std::vector<flow::jit::Tensor> host;
  std::uniform_real_distribution<float> d(-2, 2);
  for (int k = 0; k < 2; ++k) {
    host.push_back(flow::jit::Tensor::empty({n}, flow::dsl::DType::Float32));
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(host.back().data())[i] = d(rng);
  }
  std::vector<flow::jit::Tensor> dev;
  for (const auto& h : host) dev.push_back(flow::jit::to_device(h, flow::runtime::DeviceType::CUDA));
  const auto out = flow::jit::to_device(exe->run(dev).at(0), flow::runtime::DeviceType::CPU);
  for (int64_t i = 0; i < n; ++i) {
    const float xv = static_cast<float*>(host[0].data())[i], av = static_cast<float*>(host[1].data())[i];
    ASSERT_FLOAT_EQ(static_cast<const float*>(out.data())[i], std::max(0.f, xv * av) + 1.f) << i;
  }
  // Eager on the device: an op, a softmax (reduction kernel), and a transposed view.
  const auto e =
      flow::jit::to_device(flow::jit::eager_op("mul", {dev[0], dev[1]}, {}).at(0), flow::runtime::DeviceType::CPU);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_FLOAT_EQ(static_cast<const float*>(e.data())[i],
                    static_cast<float*>(host[0].data())[i] * static_cast<float*>(host[1].data())[i]);
  const auto row = flow::jit::eager_view("reshape", dev[0], {{"shape", std::vector<int64_t>{1, n}}});
  const auto sm = flow::jit::to_device(flow::jit::eager_op("softmax", {row}, {{"dim", int64_t{-1}}}).at(0),
                                       flow::runtime::DeviceType::CPU);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += static_cast<const float*>(sm.data())[i];
  EXPECT_NEAR(total, 1.0, 1e-4);
}

// ---- CUDA graphs (runtime/cuda_graph.h, jit/cuda_graph_runner.h) -----------------------------------

namespace {

// out = x * (a * a + b) + 1: with `a` and `b` frozen, a * a + b is parameter-only work.
dsl::Graph param_graph(int64_t n) {
  dsl::Graph g;
  const int x = g.add_input({{n}, DType::Float32}, "x");
  const int a = g.add_input({{n}, DType::Float32}, "a");
  const int b = g.add_input({{n}, DType::Float32}, "b");
  const int w = g.add("add", {g.add("mul", {a, a}), b});
  const int xw = g.add("mul", {x, w});
  g.mark_output(g.add("add", {xw, g.add_constant(1.0, DType::Float64, true)}));
  return g;
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], want[i]) << what << " at " << i;
}

}  // namespace

// Without a GPU: compiling with cuda_graphs needs no device, the executable reports that nothing
// was captured yet, and the graph API is a clear error.
TEST(CudaGraphs, OptionCompilesWithoutADeviceAndGraphApiIsAClearError) {
  jit::CompileOptions opt;
  opt.target = dsl::Target::CUDA;
  opt.cuda_arch = jit::default_cuda_arch();
  EXPECT_FALSE(opt.cuda_graphs);  // opt-in
  opt.cuda_graphs = true;
  FLOW_REQUIRE_NVRTC();  // a compile error is a failure, not a skip
  std::shared_ptr<jit::Executable> exe = jit::compile(chain_graph(1000), {}, opt);
  EXPECT_FALSE(exe->graph_captured());
  EXPECT_EQ(exe->num_graph_replays(), 0);
  const std::string text = exe->explain(false);
  EXPECT_TRUE(contains(text, "CUDA graph: not captured yet (the first run warms up, the second captures)")) << text;
  opt.cuda_graphs = false;
  EXPECT_FALSE(contains(jit::compile(chain_graph(1000), {}, opt)->explain(false), "CUDA graph")) << "no line when off";
  if (rc::cuda_available()) return;
  try {
    rc::CudaGraph::capture(nullptr, [] {});
    FAIL() << "no exception";
  } catch (const rc::CudaError& e) {
    EXPECT_EQ(e.code(), -1);
    EXPECT_TRUE(contains(e.what(), "CUDA is not available")) << e.what();
  }
  EXPECT_THROW(rc::is_capturing(nullptr), rc::CudaError);
}

// Capture records without running; replay runs; a work function that throws, or that synchronizes
// (which the driver refuses during a capture), ends the capture and leaves the stream usable.
TEST(CudaGraph, CaptureReplaysAndAFailedCaptureLeavesTheStreamUsable) {
  FLOW_REQUIRE_GPU();
  rc::CudaStream stream;
  const rc::Stream s = stream.get();
  rc::StreamGuard guard(s);
  const size_t n = size_t{1} << 20;
  auto buf = Buffer::allocate(n, DeviceType::CUDA);
  auto bytes = [&] {
    std::vector<unsigned char> host(n);
    rc::copy_device_to_host(host.data(), buf->data(), n);
    return host;
  };
  auto all = [](const std::vector<unsigned char>& v, unsigned char x) {
    return std::all_of(v.begin(), v.end(), [x](unsigned char c) { return c == x; });
  };
  rc::memset_device(buf->data(), 0, n);
  EXPECT_FALSE(rc::is_capturing(s));
  bool capturing_inside = false;
  rc::CudaGraph graph = rc::CudaGraph::capture(s, [&] {
    capturing_inside = rc::is_capturing(s);
    rc::driver::memset_d8(buf->data(), 7, n, s);
  });
  EXPECT_TRUE(capturing_inside);
  EXPECT_FALSE(rc::is_capturing(s));
  EXPECT_TRUE(all(bytes(), 0)) << "a capture runs nothing";
  graph.replay(s);
  EXPECT_TRUE(all(bytes(), 7));

  try {
    rc::CudaGraph::capture(s, [&] {
      rc::driver::memset_d8(buf->data(), 9, n, s);
      throw std::runtime_error("boom");
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  EXPECT_FALSE(rc::is_capturing(s));
  EXPECT_THROW(rc::CudaGraph::capture(s,
                                      [&] {
                                        rc::driver::memset_d8(buf->data(), 9, n, s);
                                        rc::driver::stream_synchronize(s);
                                      }),
               rc::CudaError);
  EXPECT_FALSE(rc::is_capturing(s));
  EXPECT_TRUE(all(bytes(), 7)) << "the failed captures ran nothing";
  rc::memset_device(buf->data(), 3, n);
  EXPECT_TRUE(all(bytes(), 3)) << "the stream works after failed captures";
  graph.replay(s);
  EXPECT_TRUE(all(bytes(), 7)) << "and so does the first graph";
}

// A block freed on the capture stream during a capture is the graph's until it is destroyed: a
// replay writes it, so the allocator must not hand it to anyone else meanwhile.
TEST(CudaAllocator, FreesDuringACaptureAreHeldByTheGraph) {
  FLOW_REQUIRE_GPU();
  rc::CudaStream stream;
  const rc::Stream s = stream.get();
  rc::StreamGuard guard(s);
  rc::CudaCachingAllocator& alloc = rc::current_allocator();
  void* inside = nullptr;
  void* reused = nullptr;
  void* other_size = nullptr;
  // A block allocated before the capture and freed in it may hold data the graph reads on every
  // replay: it is held, never reused within the capture. (Freeing one first also leaves a cached
  // block, so the empty_cache() below has something it must not release.)
  void* before_capture = alloc.allocate(4096);
  void* cached = alloc.allocate(1 << 16);
  alloc.free(cached);
  void* not_reused = nullptr;
  alloc.reset_peak();
  const rc::AllocatorStats before = alloc.stats();
  std::optional<rc::CudaGraph> graph;
  graph.emplace(rc::CudaGraph::capture(s, [&] {
    alloc.free(before_capture);
    not_reused = alloc.allocate(4096);
    alloc.free(not_reused);
    inside = alloc.allocate(4096);
    rc::driver::memset_d8(inside, 1, 4096, s);
    alloc.free(inside);
    // Within the same capture a freed block may back a later tensor of its size class: the replay
    // runs the old tensor's last use before the new one's first write, in stream order.
    other_size = alloc.allocate(8192);
    reused = alloc.allocate(4000);
    rc::driver::memset_d8(reused, 2, 4000, s);
    alloc.free(reused);
    alloc.free(other_size);
    // Emptying the cache would synchronize the device and invalidate the capture: it does nothing.
    EXPECT_EQ(rc::empty_cache(), 0u);
  }));
  EXPECT_NE(not_reused, before_capture) << "a block from before the capture was reused within it";
  EXPECT_EQ(inside, not_reused) << "a block freed earlier in the capture was not reused within it";
  EXPECT_EQ(reused, inside) << "a block freed earlier in the capture was not reused within it";
  EXPECT_NE(other_size, inside);
  EXPECT_EQ(graph->held_blocks(), 3u) << "each block held once, however often it was reused";
  EXPECT_EQ(alloc.stats().peak - before.allocated, 4096u + 8192u) << "the capture's peak is its working set";
  EXPECT_GE(alloc.stats().cached, size_t{1} << 16) << "empty_cache() released blocks during the capture";
  graph->replay(s);
  void* after = alloc.allocate(4096);
  EXPECT_NE(after, inside) << "a block the graph writes was handed out";
  alloc.free(after);
  graph.reset();  // gives the block back
  void* again = alloc.allocate(4096);
  EXPECT_EQ(again, inside) << "the block returns to the stream's free list with the graph";
  alloc.free(again);
  rc::synchronize();
}

// cuda_graphs: the first run warms up, the second captures, later runs replay; results equal the
// normal path's on fresh inputs every call, and a returned output is never overwritten later.
TEST(CudaGraphs, ChainGraphReplaysMatchTheNormalPath) {
  FLOW_REQUIRE_GPU();
  auto rng = flow::test::rng(91);
  const int64_t n = 100003;
  const dsl::Graph g = chain_graph(n);
  jit::CompileOptions opt = gpu_options();
  auto plain = jit::compile(g, {}, opt);
  opt.cuda_graphs = true;
  auto graphed = jit::compile(g, {}, opt);
  jit::Tensor out3;
  std::vector<float> out3_host;
  for (int call = 1; call <= 4; ++call) {
    std::vector<jit::Tensor> in;
    for (int i = 0; i < 3; ++i) in.push_back(to_device(random_floats(static_cast<size_t>(n), rng), {n}));
    const std::vector<jit::Tensor> got = graphed->run(in);
    const std::vector<jit::Tensor> want = plain->run(in);
    ASSERT_EQ(got.size(), 1u);
    expect_same(to_host(got[0]), to_host(want[0]), "call " + std::to_string(call));
    EXPECT_NE(got[0].storage, want[0].storage);
    EXPECT_EQ(graphed->graph_captured(), call >= 2) << call;
    EXPECT_EQ(graphed->num_graph_replays(), std::max(0, call - 2)) << call;
    if (call == 3) {
      out3 = got[0];
      out3_host = to_host(out3);
    }
  }
  expect_same(to_host(out3), out3_host, "call 3's output after call 4");
  EXPECT_EQ(graphed->num_graph_replays(), 2);
  const std::string text = graphed->explain(false);
  EXPECT_TRUE(contains(text, "CUDA graph: captured, 2 replays")) << text;
  // The eager-style entry point (constants as parameters) never replays.
  graphed->run({to_device(random_floats(static_cast<size_t>(n), rng), {n}),
                to_device(random_floats(static_cast<size_t>(n), rng), {n}),
                to_device(random_floats(static_cast<size_t>(n), rng), {n})},
               {});
  EXPECT_EQ(graphed->num_graph_replays(), 2);
}

// Frozen inputs are read in place by the graph (not copied) and their parameter-only work stays
// cached; a new parameter tensor or an in-place update (version bump) drops the graph: that run
// takes the normal path and the next one captures again.
TEST(CudaGraphs, NewParameterStateRecaptures) {
  FLOW_REQUIRE_GPU();
  auto rng = flow::test::rng(92);
  const int64_t n = 4099;
  const dsl::Graph g = param_graph(n);
  jit::CompileOptions opt = gpu_options();
  opt.frozen_inputs = {false, true, true};
  auto plain = jit::compile(g, {}, opt);
  opt.cuda_graphs = true;
  auto graphed = jit::compile(g, {}, opt);
  auto fresh = [&] { return to_device(random_floats(static_cast<size_t>(n), rng), {n}); };
  jit::Tensor a = fresh(), b = fresh();
  auto check = [&](const std::string& what) {
    const std::vector<jit::Tensor> in = {fresh(), a, b};
    expect_same(to_host(graphed->run(in).at(0)), to_host(plain->run(in).at(0)), what);
  };
  for (int call = 1; call <= 4; ++call) check("call " + std::to_string(call));
  EXPECT_EQ(graphed->num_graph_replays(), 2);
  a = fresh();  // a new parameter tensor
  check("new parameter");
  EXPECT_FALSE(graphed->graph_captured());
  check("recapture");
  EXPECT_TRUE(graphed->graph_captured());
  check("replay after recapture");
  EXPECT_EQ(graphed->num_graph_replays(), 3);
  const std::vector<float> b_new = random_floats(static_cast<size_t>(n), rng);
  rc::copy_host_to_device(b.storage->data(), b_new.data(), b_new.size() * sizeof(float));
  b.storage->bump_version();  // an in-place update of a parameter
  check("in-place update");
  EXPECT_FALSE(graphed->graph_captured());
  check("recapture after the update");
  check("replay after the update");
  EXPECT_EQ(graphed->num_graph_replays(), 4);
}

// ---- cuDNN / cuBLASLt library steps, planned without a device ---------------------------------------

namespace {

// A ResNet block under float16 autocast for CUDA: conv -> eval batch norm -> relu -> conv (+bias)
// -> residual add -> relu, then a linear with tanh-GELU and one with exact GELU.
dsl::Graph half_block_graph() {
  dsl::Graph g;
  g.set_autocast(dsl::AutocastPolicy{DType::Float16, dsl::AutocastDevice::CUDA});
  const int x = g.add_input({{2, 8, 10, 10}, DType::Float32}, "x");
  const int w1 = g.add_input({{8, 8, 3, 3}, DType::Float32}, "w1");
  std::vector<int> bn;
  for (const char* name : {"mean", "var", "gamma", "beta"}) bn.push_back(g.add_input({{8}, DType::Float32}, name));
  const int w2 = g.add_input({{8, 8, 3, 3}, DType::Float32}, "w2");
  const int b2 = g.add_input({{8}, DType::Float32}, "b2");
  const int lw = g.add_input({{16, 8}, DType::Float32}, "lw");
  const int lb = g.add_input({{16}, DType::Float32}, "lb");
  int h = g.add("conv2d", {x, w1}, {{"padding", int64_t{1}}});
  h = g.add("batch_norm", {h, bn[0], bn[1], bn[2], bn[3]}, {{"eps", 1e-5}, {"training", false}});
  h = g.add("relu", {h});
  h = g.add("conv2d", {h, w2, b2}, {{"padding", int64_t{1}}});
  h = g.add("relu", {g.add("add", {h, g.add("cast", {x}, {{"dtype", std::string("float16")}})})});
  const int pooled = g.add("mean", {h}, {{"dims", std::vector<int64_t>{2, 3}}, {"keepdim", false}});
  g.mark_output(g.add("gelu", {g.add("linear", {pooled, lw, lb})}, {{"approximate", std::string("tanh")}}));
  g.mark_output(g.add("gelu", {g.add("linear", {pooled, lw, lb})}, {{"approximate", std::string("none")}}));
  return g;
}

}  // namespace

TEST(CudaLibrarySteps, HalfResNetBlockPlansCudnnAndCublasLtCallsWithFusedEpilogues) {
  const dsl::Graph g = half_block_graph();
  jit::CompileOptions opt;
  opt.target = dsl::Target::CUDA;
  opt.cuda_arch = "sm_90";
  opt.frozen_inputs.assign(g.inputs().size(), true);
  opt.frozen_inputs[0] = false;
  FLOW_REQUIRE_NVRTC();  // a compile error is a failure, not a skip
  std::shared_ptr<jit::Executable> exe = jit::compile(g, {}, opt);
  const std::string text = exe->explain(false);
  EXPECT_EQ(exe->num_folded(), 1) << text;  // the batch norm, through the autocast casts
  // Half convolutions run NHWC on CUDA; the second stays NCHW because its residual (the input x)
  // is NCHW, which an NHWC result would read transposed (scheduler/channels_last.h).
  EXPECT_EQ(exe->num_channels_last(), 1) << text;
  ASSERT_EQ(exe->num_library_calls(), 4) << text;
  std::vector<std::string> described;
  for (const auto& s : exe->library_steps()) described.push_back(s.describe());
  EXPECT_EQ(described[0], "conv2d (cuDNN) + post-ops [relu]") << text;
  EXPECT_EQ(described[1], "conv2d (cuDNN) + post-ops [add, relu]") << text;  // residual and relu in the call
  EXPECT_EQ(described[2], "linear (cuBLASLt) + post-ops [gelu_tanh]") << text;
  EXPECT_EQ(described[3], "linear (cuBLASLt)") << text;  // exact GELU is a generated kernel
  EXPECT_TRUE(contains(text, "tanh approximation")) << "the rejected merge names why:\n" << text;
  // Every generated kernel compiles with NVRTC without local memory; the pointwise ones use vector
  // accesses (the PTX is not kept with the cached cubin, so compile again here).
  int vectorized = 0;
  for (const auto& k : exe->kernels()) {
    const auto c = jit::cuda::cuda_compile(k->scheduled.func, "sm_90");
    EXPECT_FALSE(contains(c.ptx, ".local")) << k->scheduled.func.name << " spills to local memory";
    vectorized += contains(c.ptx, "ld.global.v") || contains(c.ptx, "ld.global.nc.v") ? 1 : 0;
  }
  EXPECT_GT(vectorized, 0);
}

TEST(CudaLibrarySteps, EpilogueGrammarRejectsWhatTheLibrariesCannotFuse) {
  // conv -> +scalar (not a bias or residual), and a second bias after the conv's own.
  dsl::Graph g;
  const int x = g.add_input({{1, 4, 6, 6}, DType::Float16}, "x");
  const int w = g.add_input({{4, 4, 1, 1}, DType::Float16}, "w");
  const int b = g.add_input({{4}, DType::Float16}, "b");
  const int c = g.add_input({{4, 1, 1}, DType::Float16}, "c");
  const int y1 = g.add("add", {g.add("conv2d", {x, w}), g.add_constant(1.0, DType::Float64, true)});
  const int y2 = g.add("add", {g.add("conv2d", {x, w, b}), c});
  const int y3 = g.add("sigmoid", {g.add("conv2d", {x, w})});
  for (int y : {y1, y2, y3}) g.mark_output(y);
  sched::FusionOptions fo;
  fo.target = dsl::Target::CUDA;
  const sched::FusionPlan plan = sched::fuse(g, fo);
  int libraries = 0;
  for (const auto& grp : plan.groups)
    if (grp.kind == sched::GroupKind::Library) {
      ++libraries;
      EXPECT_TRUE(grp.epilogue.empty()) << plan.to_string(g);
    }
  EXPECT_EQ(libraries, 3);
  std::string reasons;
  for (const auto& r : plan.rejected) reasons += r.reason + "\n";
  EXPECT_TRUE(contains(reasons, "scalar add")) << reasons;
  EXPECT_TRUE(contains(reasons, "a second bias")) << reasons;
  EXPECT_TRUE(contains(reasons, "'sigmoid' is not a cuDNN post-op")) << reasons;
}

TEST(CudaLibrarySteps, Float64LibraryOpsOnCudaAreAClearError) {
  // cuDNN/cuBLASLt calls are wired for float32, float16 and bfloat16 only: a float64 product says
  // so at compile time instead of failing inside a library.
  for (const char* op : {"matmul", "conv2d"}) {
    dsl::Graph g;
    const bool conv = std::string(op) == "conv2d";
    const int a = g.add_input({conv ? dsl::Shape{1, 2, 5, 5} : dsl::Shape{3, 4}, DType::Float64}, "a");
    const int b = g.add_input({conv ? dsl::Shape{3, 2, 3, 3} : dsl::Shape{4, 2}, DType::Float64}, "b");
    g.mark_output(g.add(op, {a, b}));
    jit::CompileOptions opt;
    opt.target = dsl::Target::CUDA;
    try {
      jit::compile(g, {}, opt);
      FAIL() << op << ": no error";
    } catch (const dsl::OpError& e) {
      EXPECT_EQ(e.kind, dsl::OpError::Kind::NotImplemented) << e.what();
      EXPECT_TRUE(contains(e.what(), "not implemented for 'Double' on CUDA")) << e.what();
    }
  }
}

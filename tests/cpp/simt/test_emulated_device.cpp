// The emulated driver's own rules (emulated_driver.cpp), called as flow calls it (dlopen + dlsym):
// memory tracking, kernel launches from an emulated image, and stream capture: what a capture
// refuses, and that a replay re-runs copies and kernels with the parameter values of capture time.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "simt/emulated_image.h"

#ifndef FLOW_EMULATED_LIBCUDA
#error "FLOW_EMULATED_LIBCUDA (the emulated libcuda.so.1) must be defined by the build"
#endif

namespace {

struct Driver {
  void* lib = nullptr;
  template <typename F>
  F fn(const char* name) const {
    void* p = dlsym(lib, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
  Driver() { lib = dlopen(FLOW_EMULATED_LIBCUDA, RTLD_NOW | RTLD_LOCAL); }
};

const Driver& drv() {
  static const Driver d;
  return d;
}

#define CU(name) drv().fn<decltype(&::name)>(#name)
// The versioned names cuda.h maps these to.
#define CU_V(name, symbol) drv().fn<decltype(&::name)>(symbol)

const char* kKernel = R"(
extern "C" __global__ void scale(float* out, const float* in, float k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * k;
}
)";

struct Fixture : ::testing::Test {
  void SetUp() override {
    ASSERT_NE(drv().lib, nullptr) << dlerror();
    ASSERT_EQ(CU(cuInit)(0), CUDA_SUCCESS);
    ASSERT_EQ(CU_V(cuStreamCreate, "cuStreamCreate")(&stream, 0), CUDA_SUCCESS);
  }
  void TearDown() override { CU_V(cuStreamDestroy, "cuStreamDestroy_v2")(stream); }
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(CU_V(cuMemAlloc, "cuMemAlloc_v2")(&p, bytes), CUDA_SUCCESS);
    return p;
  }
  CUfunction scale_function() {
    flow::test::simt::EmulatedImage image;
    image.source = kKernel;
    image_text = flow::test::simt::serialize_emulated_image(image);
    CUmodule m = nullptr;
    EXPECT_EQ(CU(cuModuleLoadData)(&m, image_text.c_str()), CUDA_SUCCESS);
    CUfunction f = nullptr;
    EXPECT_EQ(CU(cuModuleGetFunction)(&f, m, "scale"), CUDA_SUCCESS);
    return f;
  }
  CUstream stream = nullptr;
  std::string image_text;
};

using EmulatedDevice = Fixture;

TEST_F(EmulatedDevice, CopiesOnlyLiveDeviceMemory) {
  const CUdeviceptr p = alloc(64);
  std::vector<char> host(64, 7);
  auto htod = CU_V(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  EXPECT_EQ(htod(p, host.data(), 64, stream), CUDA_SUCCESS);
  EXPECT_EQ(htod(p, host.data(), 65, stream), CUDA_ERROR_INVALID_VALUE);  // one byte past the end
  EXPECT_EQ(htod(reinterpret_cast<CUdeviceptr>(host.data()), host.data(), 8, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU_V(cuMemFree, "cuMemFree_v2")(p), CUDA_SUCCESS);
  EXPECT_EQ(htod(p, host.data(), 8, stream), CUDA_ERROR_INVALID_VALUE);     // freed
  EXPECT_EQ(CU_V(cuMemFree, "cuMemFree_v2")(p), CUDA_ERROR_INVALID_VALUE);  // twice
}

// Host code that dereferences a device pointer faults, as on a GPU (device memory is mapped
// PROT_NONE except while the emulated device works in it).
TEST_F(EmulatedDevice, HostAccessToDeviceMemoryFaults) {
  const CUdeviceptr p = alloc(64);
  EXPECT_DEATH({ std::printf("%d\n", *reinterpret_cast<volatile int*>(p)); }, "");
  std::vector<char> host(64, 1);
  EXPECT_EQ(CU_V(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")(p, host.data(), 64, stream), CUDA_SUCCESS);
}

TEST_F(EmulatedDevice, LaunchesAKernelFromAnImage) {
  const int n = 1000;
  const CUdeviceptr in = alloc(n * 4), out = alloc(n * 4);
  std::vector<float> x(n), y(n, 0.0f);
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  ASSERT_EQ(CU_V(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")(in, x.data(), n * 4, stream), CUDA_SUCCESS);
  CUfunction f = scale_function();
  float k = 3.0f;
  int count = n;
  void* params[] = {const_cast<CUdeviceptr*>(&out), const_cast<CUdeviceptr*>(&in), &k, &count};
  ASSERT_EQ(CU(cuLaunchKernel)(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(CU_V(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")(y.data(), out, n * 4, stream), CUDA_SUCCESS);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], 3.0f * static_cast<float>(i)) << i;
  EXPECT_EQ(CU(cuLaunchKernel)(f, 1, 1, 1, 2048, 1, 1, 0, stream, params, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(EmulatedDevice, ReplayUsesTheParametersOfCaptureTime) {
  const int n = 64;
  const CUdeviceptr in = alloc(n * 4), out = alloc(n * 4);
  std::vector<float> x(n, 2.0f), y(n, 0.0f);
  CUfunction f = scale_function();
  float k = 5.0f;
  int count = n;
  void* params[] = {const_cast<CUdeviceptr*>(&out), const_cast<CUdeviceptr*>(&in), &k, &count};
  ASSERT_EQ(CU_V(cuStreamBeginCapture, "cuStreamBeginCapture_v2")(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  ASSERT_EQ(CU_V(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")(in, x.data(), n * 4, stream), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuLaunchKernel)(f, 1, 1, 1, 64, 1, 1, 0, stream, params, nullptr), CUDA_SUCCESS);
  k = 100.0f;  // after capture: the graph keeps 5
  CUgraph g = nullptr;
  ASSERT_EQ(CU(cuStreamEndCapture)(stream, &g), CUDA_SUCCESS);
  CUgraphExec e = nullptr;
  ASSERT_EQ(CU_V(cuGraphInstantiate, "cuGraphInstantiateWithFlags")(&e, g, 0), CUDA_SUCCESS);
  // Nothing ran during the capture.
  ASSERT_EQ(CU_V(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")(y.data(), out, n * 4, stream), CUDA_SUCCESS);
  EXPECT_NE(y[0], 10.0f);
  x.assign(n, 3.0f);  // the captured copy reads the host memory at replay time
  ASSERT_EQ(CU(cuGraphLaunch)(e, stream), CUDA_SUCCESS);
  ASSERT_EQ(CU_V(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")(y.data(), out, n * 4, stream), CUDA_SUCCESS);
  for (float v : y) ASSERT_EQ(v, 15.0f);
  CU(cuGraphExecDestroy)(e);
  CU(cuGraphDestroy)(g);
}

TEST_F(EmulatedDevice, CaptureRefusesWhatTheDriverRefuses) {
  auto begin = CU_V(cuStreamBeginCapture, "cuStreamBeginCapture_v2");
  auto end = CU(cuStreamEndCapture);
  CUgraph g = nullptr;
  // Allocation in thread-local mode: refused, and the capture is invalidated.
  ASSERT_EQ(begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(CU_V(cuMemAlloc, "cuMemAlloc_v2")(&p, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(end(stream, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // In relaxed mode (flow's mem_alloc switches to it) allocation is allowed.
  ASSERT_EQ(begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  ASSERT_EQ(CU(cuThreadExchangeStreamCaptureMode)(&mode), CUDA_SUCCESS);
  EXPECT_EQ(CU_V(cuMemAlloc, "cuMemAlloc_v2")(&p, 64), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuThreadExchangeStreamCaptureMode)(&mode), CUDA_SUCCESS);
  EXPECT_EQ(end(stream, &g), CUDA_SUCCESS);
  CU(cuGraphDestroy)(g);
  // Synchronizing the capturing stream, or the context: refused, capture invalidated.
  ASSERT_EQ(begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuStreamSynchronize)(stream), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(end(stream, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT_EQ(begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuCtxSynchronize)(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(end(stream, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // Another thread's capture: a THREAD_LOCAL one does not restrict this thread, a GLOBAL one does.
  for (const CUstreamCaptureMode m : {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_GLOBAL}) {
    CUresult began = CUDA_ERROR_UNKNOWN, ended = CUDA_ERROR_UNKNOWN;
    std::mutex mu;
    std::condition_variable cv;
    int phase = 0;
    std::thread other([&] {
      began = begin(stream, m);
      {
        std::unique_lock<std::mutex> lock(mu);
        phase = 1;
        cv.notify_all();
        cv.wait(lock, [&] { return phase == 2; });
      }
      ended = end(stream, &g);
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return phase == 1; });
    }
    const CUresult r = CU_V(cuMemAlloc, "cuMemAlloc_v2")(&p, 64);
    EXPECT_EQ(r, m == CU_STREAM_CAPTURE_MODE_GLOBAL ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS) << m;
    {
      std::lock_guard<std::mutex> lock(mu);
      phase = 2;
    }
    cv.notify_all();
    other.join();
    EXPECT_EQ(began, CUDA_SUCCESS);
    EXPECT_EQ(ended, m == CU_STREAM_CAPTURE_MODE_GLOBAL ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS) << m;
    if (ended == CUDA_SUCCESS) CU(cuGraphDestroy)(g);
  }
  // Ending a capture from another thread than the one that began it.
  ASSERT_EQ(begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  CUresult wrong = CUDA_SUCCESS;
  std::thread([&] { wrong = end(stream, &g); }).join();
  EXPECT_EQ(wrong, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  ASSERT_EQ(end(stream, &g), CUDA_SUCCESS);
  CU(cuGraphDestroy)(g);
  // The legacy default stream cannot capture.
  EXPECT_EQ(begin(nullptr, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

}  // namespace

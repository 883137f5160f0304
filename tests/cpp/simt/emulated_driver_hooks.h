// What the emulated libraries (emulated_cublaslt.cpp, emulated_cudnn.cpp) call in the emulated
// driver (emulated_driver.cpp), found in the already loaded libcuda.so.1: whether memory is live
// device memory, and running a host function in stream order (recorded when the stream captures).
#pragma once
#include <cuda.h>
#include <dlfcn.h>

#include <cstddef>

namespace flow::test::simt {

struct EmulatedDriverHooks {
  int (*is_device_range)(const void*, size_t) = nullptr;
  CUresult (*enqueue)(CUstream, int (*)(void*), void*, void (*)(void*)) = nullptr;
};

// Both null when the emulated driver is not loaded (the library then refuses to initialize).
inline const EmulatedDriverHooks& emulated_driver() {
  static const EmulatedDriverHooks hooks = [] {
    EmulatedDriverHooks x;
    if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      x.is_device_range = reinterpret_cast<decltype(x.is_device_range)>(dlsym(h, "flow_emulated_is_device_range"));
      x.enqueue = reinterpret_cast<decltype(x.enqueue)>(dlsym(h, "flow_emulated_enqueue"));
    }
    return x;
  }();
  return hooks;
}

}  // namespace flow::test::simt

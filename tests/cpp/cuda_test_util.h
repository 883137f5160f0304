// Helpers shared by the CUDA test binaries (runtime-level: no dsl/jit includes, so test_cuda_libs,
// which links flow_runtime only, can use them too).
//
// Note: a test skips only when what it needs is really absent: no GPU for device tests, no CUDA
// toolkit for NVRTC and library tests. On a machine that has them (a toolkit directory,
// CUDA_HOME, FLOW_CUDA_LIB_PATH, or a working device) a library that does not load is a failure,
// never a skip, so a loader bug cannot hide behind "not installed".
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "runtime/cuda_driver.h"
#include "runtime/dynlib.h"

// Skips a test that needs a device, saying why there is none.
#define FLOW_REQUIRE_GPU()                    \
  if (!flow::runtime::cuda::cuda_available()) \
  GTEST_SKIP() << "no CUDA device (" << flow::runtime::cuda::unavailable_reason() << ")"

namespace flow::test {

inline bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// Whether this machine is expected to have the CUDA libraries.
inline bool cuda_toolkit_expected() {
  return std::filesystem::exists("/usr/local/cuda/lib64") || std::getenv("CUDA_HOME") != nullptr ||
         std::getenv("FLOW_CUDA_LIB_PATH") != nullptr || flow::runtime::cuda::cuda_available();
}

// "" when `load` succeeds, else its error.
inline std::string load_error(const std::function<void()>& load) {
  try {
    load();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace flow::test

// Skips when the CUDA library that `load_fn` loads is absent from a machine without a toolkit;
// fails where a toolkit is present.
#define FLOW_REQUIRE_CUDA_LIB(load_fn)                                                                    \
  if (const std::string flow_lib_err = flow::test::load_error(load_fn); !flow_lib_err.empty()) {          \
    if (flow::test::cuda_toolkit_expected()) FAIL() << "a CUDA toolkit is present but: " << flow_lib_err; \
    GTEST_SKIP() << "no CUDA toolkit: " << flow_lib_err;                                                  \
  }

// NVRTC compiles without a GPU: tests that need it skip only without a toolkit.
#define FLOW_REQUIRE_NVRTC() \
  FLOW_REQUIRE_CUDA_LIB([] { flow::runtime::load_cuda_library(flow::runtime::CudaLib::Nvrtc); })

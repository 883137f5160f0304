// Helpers shared by the CUDA test binaries (runtime-level: no dsl/jit includes, so test_cuda_libs,
// which links flow_runtime only, can use them too).
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "runtime/cuda_driver.h"

// Skips a test that needs a device, saying why there is none.
#define FLOW_REQUIRE_GPU()                    \
  if (!flow::runtime::cuda::cuda_available()) \
  GTEST_SKIP() << "no CUDA device (" << flow::runtime::cuda::unavailable_reason() << ")"

namespace flow::test {

inline bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace flow::test

// Shared main for every GoogleTest binary: prints the random seed so a failure can be replayed
// with FLOW_TEST_SEED=<seed>.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "test_util.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  flow::test::init_seed();
  // Each test binary gets its own kernel cache directory, so runs never see each other's entries.
  if (!std::getenv("FLOW_CACHE_DIR")) {
    std::string dir = "/tmp/flow_test_cache_XXXXXX";
    if (mkdtemp(dir.data())) setenv("FLOW_CACHE_DIR", dir.c_str(), 1);
  }
  return RUN_ALL_TESTS();
}

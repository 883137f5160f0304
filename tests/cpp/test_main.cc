// Shared main for every GoogleTest binary: prints the random seed so a failure can be replayed
// with FLOW_TEST_SEED=<seed>.
#include <gtest/gtest.h>

#include "test_util.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  flow::test::init_seed();
  return RUN_ALL_TESTS();
}

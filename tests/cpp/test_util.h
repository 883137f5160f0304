// Test helpers: a seeded RNG that is fresh each run (time-based) unless FLOW_TEST_SEED is set, and
// whose seed is printed so failures can be replayed.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace flow::test {

inline uint64_t& seed_storage() {
  static uint64_t seed = 0;
  return seed;
}

inline void init_seed() {
  const char* env = std::getenv("FLOW_TEST_SEED");
  seed_storage() = env ? std::strtoull(env, nullptr, 10)
                       : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("[flow] FLOW_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed_storage()));
}

// A generator for one test, derived from the run's seed and a per-test salt.
inline std::mt19937_64 rng(uint64_t salt = 0) { return std::mt19937_64(seed_storage() ^ (salt * 0x9E3779B97F4A7C15ULL)); }

}  // namespace flow::test

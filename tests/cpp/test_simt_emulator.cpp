// The host SIMT emulator (tests/cpp/simt) on hand-written CUDA C++: builtins over 3-D grids and
// blocks, warp shuffles with widths and partial masks, barriers over shared memory, shared memory
// poisoned at each block's start, and the faults it must report instead of computing garbage or
// hanging (a barrier or shuffle that not every thread reaches, lanes that disagree on a mask, a
// source that does not build).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "simt/simt_emulator.h"

namespace flow::test::simt {
namespace {

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

// Runs `entry` of `source` with one int buffer argument; returns the launch's error ("" if none).
std::string run(const std::string& source, const std::string& entry, Dim3 grid, Dim3 block, std::vector<int>& out) {
  const auto m = module_for(source, {entry});
  int* p = out.data();
  void* params[] = {&p};
  try {
    m->launch(entry, grid, block, params);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(SimtEmulator, BuiltinsOverThreeDimensionalGridsAndBlocks) {
  const std::string src = R"(
extern "C" __global__ void ids(int* out) {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  out[b * blockDim.x * blockDim.y * blockDim.z + t] =
      threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z + 1000 * (blockIdx.x + 10 * blockIdx.y + 100 * blockIdx.z);
})";
  const Dim3 grid{2, 1, 3}, block{4, 3, 2};
  std::vector<int> out(2 * 3 * 24, -1);
  ASSERT_EQ(run(src, "ids", grid, block, out), "");
  for (int bz = 0; bz < 3; ++bz)
    for (int bx = 0; bx < 2; ++bx)
      for (int tz = 0; tz < 2; ++tz)
        for (int ty = 0; ty < 3; ++ty)
          for (int tx = 0; tx < 4; ++tx) {
            const int b = bx + 2 * bz, t = tx + 4 * (ty + 3 * tz);
            EXPECT_EQ(out[b * 24 + t], tx + 10 * ty + 100 * tz + 1000 * (bx + 100 * bz)) << b << " " << t;
          }
}

TEST(SimtEmulator, ShufflesFollowTheHardwareRules) {
  // Per lane of a 64-thread block: xor 1, down 3 (own value past the warp's end), up 2 (own value
  // below lane 2), idx 5 within segments of 8, and an idx from outside a half mask (all ones).
  const std::string src = R"(
extern "C" __global__ void shuffles(int* out) {
  const int lane = threadIdx.x & 31;
  const int v = 100 * (threadIdx.x >> 5) + lane;
  int* o = out + 6 * threadIdx.x;
  o[0] = __shfl_xor_sync(0xffffffffu, v, 1);
  o[1] = __shfl_down_sync(0xffffffffu, v, 3);
  o[2] = __shfl_up_sync(0xffffffffu, v, 2);
  o[3] = __shfl_sync(0xffffffffu, v, 5, 8);
  if (lane < 16) {
    o[4] = __shfl_sync(0x0000ffffu, v, lane + 16);  // lane + 16 is not in the mask
    o[5] = __shfl_xor_sync(0x0000ffffu, v, 15);
  }
})";
  std::vector<int> out(64 * 6, 7);
  ASSERT_EQ(run(src, "shuffles", {1}, {64}, out), "");
  for (int t = 0; t < 64; ++t) {
    const int lane = t & 31, base = 100 * (t >> 5);
    const int* o = out.data() + 6 * t;
    EXPECT_EQ(o[0], base + (lane ^ 1)) << t;
    EXPECT_EQ(o[1], base + (lane + 3 < 32 ? lane + 3 : lane)) << t;
    EXPECT_EQ(o[2], base + (lane >= 2 ? lane - 2 : lane)) << t;
    EXPECT_EQ(o[3], base + (lane & ~7) + 5) << t;
    EXPECT_EQ(o[4], lane < 16 ? -1 : 7) << t;
    EXPECT_EQ(o[5], lane < 16 ? base + (lane ^ 15) : 7) << t;
  }
}

TEST(SimtEmulator, BarriersOrderSharedMemoryAcrossThreads) {
  // Reverses each block's slice through shared memory; without the barrier the shuffled thread
  // order would read slots not written yet.
  const std::string src = R"(
extern "C" __global__ void reverse(int* out) {
  __shared__ int tile[128];
  tile[threadIdx.x] = blockIdx.x * 1000 + threadIdx.x;
  __syncthreads();
  out[blockIdx.x * 128 + threadIdx.x] = tile[127 - threadIdx.x];
})";
  std::vector<int> out(3 * 128, -1);
  ASSERT_EQ(run(src, "reverse", {3}, {128}, out), "");
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 128; ++t) EXPECT_EQ(out[b * 128 + t], b * 1000 + 127 - t);
}

TEST(SimtEmulator, SharedMemoryStartsEachBlockPoisoned) {
  // Each block reads its tiles before writing them, then writes them: a device leaves shared memory
  // undefined at a block's start, so the reads must see the poison bytes (all ones: -1, NaN), not
  // zeros and not what the previous block wrote. Two arrays and a float, so every __shared__
  // declaration is covered, in a kernel with a barrier (fibers) and one without.
  const std::string src = R"(
extern "C" __global__ void stale(int* out) {
  __shared__ int a[4];
  alignas(16) __shared__ unsigned char b[8];
  __shared__ float f;
  const int t = threadIdx.x;
  out[blockIdx.x * 4 + t] = a[t] == -1 && b[2 * t] == 0xFF && f != f ? 1 : 0;
  __syncthreads();
  a[t] = 5;
  b[2 * t] = 0;
  f = 1.0f;
})";
  const std::string no_barrier = R"(
extern "C" __global__ void stale_one_thread(int* out) {
  __shared__ long long v;
  out[blockIdx.x] = v == -1 ? 1 : 0;
  v = blockIdx.x;
})";
  std::vector<int> out(3 * 4, 7);
  ASSERT_EQ(run(src, "stale", {3}, {4}, out), "");
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], 1) << i;
  std::vector<int> one(3, 7);
  ASSERT_EQ(run(no_barrier, "stale_one_thread", {3}, {1}, one), "");
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], 1) << i;
}

TEST(SimtEmulator, UnreachedBarrierIsReportedNotHung) {
  const std::string src = R"(
extern "C" __global__ void divergent(int* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
})";
  std::vector<int> out(32, 0);
  const std::string err = run(src, "divergent", {1}, {32}, out);
  EXPECT_TRUE(contains(err, "deadlock")) << err;
  EXPECT_TRUE(contains(err, "16 of 32 threads wait at __syncthreads, 16 returned")) << err;
}

TEST(SimtEmulator, ShuffleFaultsAreReported) {
  // Lanes that disagree on the mask.
  const std::string disagree = R"(
extern "C" __global__ void disagree(int* out) {
  const unsigned mask = threadIdx.x == 3 ? 0x0000000fu : 0xffffffffu;
  out[threadIdx.x] = __shfl_xor_sync(mask | (1u << threadIdx.x), 1, 1);
})";
  std::vector<int> out(32, 0);
  std::string err = run(disagree, "disagree", {1}, {32}, out);
  EXPECT_TRUE(contains(err, "shuffle lanes disagree on the mask") || contains(err, "deadlock")) << err;
  EXPECT_FALSE(err.empty());
  // A lane of the mask that never arrives.
  const std::string missing = R"(
extern "C" __global__ void missing(int* out) {
  if (threadIdx.x != 7) out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1, 1);
})";
  err = run(missing, "missing", {1}, {32}, out);
  EXPECT_TRUE(contains(err, "deadlock")) << err;
  EXPECT_TRUE(contains(err, "waiting in a shuffle")) << err;
  // A lane outside its own mask.
  const std::string outside = R"(
extern "C" __global__ void outside(int* out) {
  out[threadIdx.x] = __shfl_sync(0x1u, 1, 0);
})";
  err = run(outside, "outside", {1}, {2}, out);
  EXPECT_TRUE(contains(err, "shuffle by a lane outside its own mask")) << err;
  EXPECT_TRUE(contains(err, "thread (1,0,0)")) << err;
}

TEST(SimtEmulator, BuildErrorsCarryTheCompilerLog) {
  try {
    module_for("extern \"C\" __global__ void broken(int* out) { out[0] = undeclared_name; }", {"broken"});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "undeclared_name")) << e.what();
    EXPECT_TRUE(contains(e.what(), "kernel.cpp")) << e.what();
  }
}

}  // namespace
}  // namespace flow::test::simt

// Note: the process's one CPU parallel backend, behind every parallel loop of a generated kernel
// (flow_parallel_for) and of the runtime.
//
// When flow is built with an OpenMP oneDNN (Debian's libdnnl is one), the backend is OpenMP itself:
// oneDNN's convolutions and GEMMs and flow's own kernels then share one team of threads. With two
// pools on the same cores, each pool's workers spin for a while after their job, and the other
// pool's next job runs against them: on the 2-core CI machine every generated kernel right after a
// oneDNN call ran at half speed (measured: the encoder's softmax, layer norm and gelu kernels took
// 2x their isolated time). This is what PyTorch does too (at::parallel_for is OpenMP).
// Without oneDNN (the GPU host's build), the backend is flow's own ThreadPool (thread_pool.h).
//
// Both backends have the same contract: [0, n) is split into min(n, num_threads()) contiguous
// ranges of near-equal size, each run exactly once; a call from inside a parallel region runs
// serially; the first exception thrown by the body is rethrown in the caller; in a child process
// created by fork() everything runs serially (the parent's threads do not exist there).
#pragma once
#include <cstdint>
#include <functional>

#include "runtime/thread_pool.h"

namespace flow::runtime {

// FLOW_NUM_THREADS, else the number of hardware threads.
int num_threads();

void parallel_for(int64_t n, ParallelBody body, void* ctx);
void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

// "openmp" or "flow" (the ThreadPool).
const char* parallel_backend();

}  // namespace flow::runtime

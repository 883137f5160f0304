// Note: flow's own CPU thread pool, the parallel backend when there is no OpenMP
// (runtime/parallel.h). It is called once per kernel launch, so a call costs no allocation and no
// thread creation: the workers are started once and spin briefly on a generation counter before
// sleeping on a condition variable.
//
// A pool of size N has N-1 worker threads; the calling thread is the N-th participant. parallel_for
// splits [0, n) into min(n, N) contiguous ranges of near-equal size (sizes differ by at most one,
// in index order), and the participants claim ranges from a shared counter, so a worker that wakes
// late simply finds the work done. A claim is tied to the call's generation (one 64-bit atomic
// holds {generation, next range}), so a late worker can never run a finished call's body.
//
// Calls from inside a parallel region (a worker, or the caller while it runs its own range) run
// serially on the calling thread: nesting never deadlocks and never oversubscribes. Concurrent
// calls from different outside threads are serialized (one job in flight per pool). The first
// exception thrown by the body is rethrown in the caller after every claimed range has finished;
// ranges not yet started when it was thrown are skipped. In a child process created by fork(), the
// global pool's workers do not exist, so it runs everything serially there.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flow::runtime {

// The body of a parallel loop in C form (what generated code passes): runs [begin, end).
using ParallelBody = void (*)(void* ctx, int64_t begin, int64_t end);

// A ParallelBody that calls the const std::function<void(int64_t, int64_t)> `ctx` points to.
void call_std_function(void* ctx, int64_t begin, int64_t end);

class ThreadPool {
 public:
  // num_threads counts the calling thread; values < 1 mean 1 (no workers: everything serial).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn over contiguous ranges covering [0, n) exactly once each and blocks until done.
  // n <= 0 runs nothing. Rethrows the first exception thrown by fn.
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);
  // The same without std::function (no type erasure beyond the pointer pair).
  void parallel_for(int64_t n, ParallelBody body, void* ctx);

  // True on a pool worker and on a caller while it runs its own range.
  static bool in_parallel_region();

 private:
  void worker_loop();
  // Claims and runs ranges of generation `gen` until none is left.
  void run_ranges(uint32_t gen, ParallelBody body, void* ctx, int64_t n, int64_t ranges);

  std::vector<std::thread> workers_;

  std::mutex submit_mutex_;  // one job in flight per pool

  // The current job, written under mutex_ before generation_ is bumped; workers copy it under mutex_.
  std::mutex mutex_;
  std::condition_variable wake_cv_;
  ParallelBody job_body_ = nullptr;
  void* job_ctx_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_ranges_ = 0;
  int sleepers_ = 0;
  bool stop_ = false;
  std::atomic<uint32_t> generation_{0};

  // High 32 bits: generation; low 32 bits: the next range to claim.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> remaining_{0};  // ranges claimed-or-not that have not finished
  std::mutex done_mutex_;
  std::condition_variable done_cv_;

  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// The process-wide pool, created on first use with threads_from_env() threads. It runs the parallel
// loops when it is the process's parallel backend (runtime/parallel.h).
ThreadPool& global_thread_pool();

// FLOW_NUM_THREADS, else std::thread::hardware_concurrency().
int threads_from_env();

// True in a child process created by fork() after a pool was created or in_forked_child() was first
// called (the fork handler is registered then).
bool in_forked_child();

}  // namespace flow::runtime

#include "runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>

namespace flow::runtime {
namespace {

// Spin iterations before a worker sleeps or the caller blocks (a pause is ~10-140 cycles, so this
// is tens of microseconds: long enough for back-to-back kernel launches, short enough not to burn a
// core while idle).
constexpr int kSpinIterations = 4000;
constexpr int kMaxThreads = 1024;

thread_local bool t_in_region = false;

// Set in the child after fork(): the workers of every pool exist only in the parent.
std::atomic<bool> g_forked_child{false};

void on_fork_child() {
  g_forked_child.store(true, std::memory_order_relaxed);
}

void register_fork_handler() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, &on_fork_child);
    return true;
  }();
  (void)registered;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  register_fork_handler();
  const int n = std::clamp(num_threads, 1, kMaxThreads);
  workers_.reserve(static_cast<size_t>(n - 1));
  for (int i = 0; i + 1 < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  if (g_forked_child.load(std::memory_order_relaxed)) {
    // In a fork()ed child the threads do not exist; joining would hang forever.
    for (std::thread& t : workers_) t.detach();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ThreadPool::in_parallel_region() {
  return t_in_region;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  // const_cast only to pass through void*; call_std_function reads it as const again.
  parallel_for(n, &call_std_function, const_cast<std::function<void(int64_t, int64_t)>*>(&fn));
}

void ThreadPool::parallel_for(int64_t n, ParallelBody body, void* ctx) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || t_in_region || g_forked_child.load(std::memory_order_relaxed)) {
    body(ctx, 0, n);  // serial: exceptions propagate directly
    return;
  }
  std::lock_guard<std::mutex> submit(submit_mutex_);
  const int64_t ranges = std::min<int64_t>(n, num_threads());
  // No range of the previous job is running any more (we waited for remaining_ == 0), and a late
  // worker cannot claim one of ours before the generation below is published.
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  remaining_.store(ranges, std::memory_order_relaxed);
  uint32_t gen = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_body_ = body;
    job_ctx_ = ctx;
    job_n_ = n;
    job_ranges_ = ranges;
    gen = generation_.load(std::memory_order_relaxed) + 1;
    claim_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
    generation_.store(gen, std::memory_order_release);
    if (sleepers_ > 0) wake_cv_.notify_all();
  }

  t_in_region = true;
  run_ranges(gen, body, ctx, n, ranges);
  t_in_region = false;

  for (int i = 0; i < kSpinIterations && remaining_.load(std::memory_order_acquire) != 0; ++i) cpu_relax();
  if (remaining_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(done_mutex_);
    done_cv_.wait(lock, [this] { return remaining_.load(std::memory_order_acquire) == 0; });
  }
  if (failed_.load(std::memory_order_acquire)) {
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(error_mutex_);
      e = error_;
      error_ = nullptr;
    }
    std::rethrow_exception(e);
  }
}

void ThreadPool::run_ranges(uint32_t gen, ParallelBody body, void* ctx, int64_t n, int64_t ranges) {
  const int64_t base = n / ranges;
  const int64_t extra = n % ranges;  // the first `extra` ranges get one more index
  for (;;) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    int64_t idx = 0;
    for (;;) {
      if (static_cast<uint32_t>(c >> 32) != gen) return;  // a later job: ours is done
      idx = static_cast<int64_t>(c & 0xffffffffULL);
      if (idx >= ranges) return;
      if (claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) break;
    }
    if (!failed_.load(std::memory_order_relaxed)) {
      const int64_t begin = idx * base + std::min(idx, extra);
      const int64_t end = begin + base + (idx < extra ? 1 : 0);
      try {
        body(ctx, begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_release);
      }
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(done_mutex_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::worker_loop() {
  t_in_region = true;
  uint32_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++i) cpu_relax();
    ParallelBody body = nullptr;
    void* ctx = nullptr;
    int64_t n = 0;
    int64_t ranges = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!stop_ && generation_.load(std::memory_order_relaxed) == seen) {
        ++sleepers_;
        wake_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
        --sleepers_;
      }
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      body = job_body_;
      ctx = job_ctx_;
      n = job_n_;
      ranges = job_ranges_;
    }
    run_ranges(seen, body, ctx, n, ranges);
  }
}

void call_std_function(void* ctx, int64_t begin, int64_t end) {
  (*static_cast<const std::function<void(int64_t, int64_t)>*>(ctx))(begin, end);
}

int threads_from_env() {
  if (const char* env = std::getenv("FLOW_NUM_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1) return static_cast<int>(std::min<long>(v, kMaxThreads));
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

bool in_forked_child() {
  register_fork_handler();
  return g_forked_child.load(std::memory_order_relaxed);
}

ThreadPool& global_thread_pool() {
  static ThreadPool pool(threads_from_env());
  return pool;
}

}  // namespace flow::runtime

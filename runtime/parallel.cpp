#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

#if defined(FLOW_PARALLEL_OPENMP)
#include <omp.h>
#endif

namespace flow::runtime {
namespace {

#if defined(FLOW_PARALLEL_OPENMP)
// Inside one of our own OpenMP ranges (omp_in_parallel() also sees oneDNN's regions).
thread_local bool t_in_range = false;

void openmp_parallel_for(int64_t n, ParallelBody body, void* ctx) {
  const int64_t ranges = std::min<int64_t>(n, num_threads());
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  const int64_t base = n / ranges;
  const int64_t extra = n % ranges;  // the first `extra` ranges get one more index
#pragma omp parallel num_threads(static_cast <int>(ranges))
  {
    // The team can be smaller than asked (OMP_THREAD_LIMIT, OMP_DYNAMIC): every thread takes the
    // ranges congruent to its number, so all of them run either way.
    const int64_t team = omp_get_num_threads();
    t_in_range = true;
    for (int64_t idx = omp_get_thread_num(); idx < ranges; idx += team) {
      if (failed.load(std::memory_order_relaxed)) break;
      const int64_t begin = idx * base + std::min(idx, extra);
      const int64_t end = begin + base + (idx < extra ? 1 : 0);
      try {
        body(ctx, begin, end);
      } catch (...) {
        // An exception must not leave an OpenMP region: keep the first, rethrow after the join.
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
    t_in_range = false;
  }
  if (error) std::rethrow_exception(error);
}
#endif

}  // namespace

int num_threads() {
  static const int n = threads_from_env();
  return n;
}

const char* parallel_backend() {
#if defined(FLOW_PARALLEL_OPENMP)
  return "openmp";
#else
  return "flow";
#endif
}

void parallel_for(int64_t n, ParallelBody body, void* ctx) {
#if defined(FLOW_PARALLEL_OPENMP)
  if (n <= 0) return;
  if (n == 1 || num_threads() == 1 || t_in_range || omp_in_parallel() || in_forked_child()) {
    body(ctx, 0, n);  // serial: exceptions propagate directly
    return;
  }
  openmp_parallel_for(n, body, ctx);
#else
  global_thread_pool().parallel_for(n, body, ctx);
#endif
}

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  // const_cast only to pass through void*; call_std_function reads it as const again.
  parallel_for(n, &call_std_function, const_cast<std::function<void(int64_t, int64_t)>*>(&fn));
}

}  // namespace flow::runtime

// Note: the scheduler interface (nvFuser's is the model). One scheduler per kernel class; each
// answers can_schedule for a specialized group, proposes Params by heuristics, and turns a group
// plus Params into a loop nest for a target. The Params are the autotuner's search space.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dsl/stmt.h"
#include "scheduler/kernel_instance.h"
#include "scheduler/params.h"

namespace flow::sched {

// How to fill each kernel parameter when launching: a buffer bound to a graph value, or a scalar
// fixed at specialization time (a size, a stride, a constant).
struct KernelArg {
  enum class Kind : uint8_t { Buffer, Int, Float } kind = Kind::Int;
  int value = -1;  // Buffer: the graph value; a scalar from a graph constant: that constant
  int64_t i = 0;
  double f = 0;
};

struct ScheduledKernel {
  dsl::LoweredFunc func;
  std::vector<KernelArg> args;  // one per func.params, same order
  Params params;
  std::string scheduler;  // "pointwise" or "reduction"
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual const char* name() const = 0;
  virtual bool can_schedule(const KernelInstance& ki, dsl::Target t) const = 0;
  virtual Params heuristics(const KernelInstance& ki, dsl::Target t) const = 0;
  // The loop nest for `ki` under `p`, with its let-bound values named canonically
  // (dsl/canonical_names.h): kernels that do the same work on different graph values are
  // identical, so they share a kernel-cache key and a tuning workload key.
  ScheduledKernel schedule(const KernelInstance& ki, const Params& p, dsl::Target t) const;

 protected:
  // Each scheduler's lowering (its value names may follow graph value ids).
  virtual ScheduledKernel lower(const KernelInstance& ki, const Params& p, dsl::Target t) const = 0;
};

const Scheduler& pointwise_scheduler();
const Scheduler& reduction_scheduler();
// The scheduler for a specialized group; throws std::logic_error if none applies.
const Scheduler& scheduler_for(const KernelInstance& ki, dsl::Target t);

}  // namespace flow::sched

// Note: how a CPU kernel's outer loop becomes parallel tasks, in one place for every scheduler.
//
// The parallel backend (runtime/parallel.h) splits a parallel loop's iterations into one range per
// thread, so the number of iterations matters only at the small end: a loop of one iteration runs
// serially on the caller's thread, and any more wakes the team. Waking it costs microseconds on an
// idle machine and up to a scheduler time slice on a busy one (a 64 x 16 row sum under flow.jit
// took 20 us serially and 250-700 us with two threads beside another busy process). So an item
// (a row, a tile) is grouped into tasks of at least kCpuTaskElements elements: small work runs
// serially, as torch's at::parallel_for does below its grain size, and large work is unchanged.
#pragma once
#include <functional>
#include <string>

#include "dsl/stmt.h"

namespace flow::sched {

// Elements per parallel task, at least (measured for pointwise kernels: with fewer, dispatching
// took longer than computing).
constexpr int64_t kCpuTaskElements = 16384;

// for item in [0, items): body(item), as a parallel loop over tasks of consecutive items, each of
// at least max(min_items, kCpuTaskElements / elements_per_item) items (the last one shorter).
// `item` names the item's variable inside body; `task` the parallel loop's.
dsl::Stmt cpu_parallel_items(const std::string& task, const std::string& item, const dsl::Expr& items,
                             const dsl::Expr& elements_per_item, int64_t min_items, const dsl::Stmt& body);

}  // namespace flow::sched

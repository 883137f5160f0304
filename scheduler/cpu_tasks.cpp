#include "scheduler/cpu_tasks.h"

#include <algorithm>

namespace flow::sched {

using namespace dsl;  // NOLINT

Stmt cpu_parallel_items(const std::string& task, const std::string& item, const Expr& items,
                        const Expr& elements_per_item, int64_t min_items, const Stmt& body) {
  const std::string per = task + "_items";
  const Expr per_task =
      max(make_int(std::max<int64_t>(1, min_items)), make_int(kCpuTaskElements) / max(elements_per_item, make_int(1)));
  const Expr first = var(task) * var(per);
  const Stmt serial = make_for(item, first, min(var(per), items - first), ForKind::Serial, body);
  return make_let(per, per_task,
                  make_for(task, make_int(0), (items + var(per) - make_int(1)) / var(per), ForKind::Parallel, serial));
}

}  // namespace flow::sched

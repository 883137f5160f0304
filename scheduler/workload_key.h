// Note: the workload key of a kernel: what a tuning record is about. Two kernels with the same key
// compute the same thing over the same sizes and layouts, so the best Params of one are the best
// of the other (on the same target). The kernel cache key cannot serve: it includes the Params, and
// compiled kernels are shape-generic (sizes are parameters), while the best Params depend on sizes.
//
// The key is XXH3-128 over a salt, the scheduler's name, the loop nest the scheduler builds with
// default-constructed Params (canonical, pointer-free, independent of the heuristics, which may
// change), the coalesced kept and reduced sizes, and the strides of every buffer. The target is not
// part of it: records store the target beside the key.
#pragma once
#include <string>

#include "dsl/stmt.h"
#include "scheduler/kernel_instance.h"

namespace flow::sched {

inline constexpr const char* kWorkloadKeySalt = "flow.workload/1";

// 32 lowercase hex digits.
std::string workload_key(const KernelInstance& ki, dsl::Target t);

}  // namespace flow::sched

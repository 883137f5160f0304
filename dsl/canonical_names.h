// Note: alpha-renaming for the kernel cache. Schedulers name a kernel's let-bound values and local
// buffers after the graph values they compute ("v17", "acc17"), so two kernels that do the same
// work on different values of a graph (every bottleneck block of a ResNet stage, say) differ only
// in those names, and their cache keys (XXH3 of the serialized loop nest) differ with them.
// canonical_value_names renames every let-bound name to "val0", "val1", ... and every allocated
// (Local or Shared) buffer to "loc0", "loc1", ... in order of first binding, which keeps the
// meaning (a bijection on bound names, to names no scheduler uses) and makes such kernels
// byte-identical: they compile once and share one cache entry. Loop variables and parameters keep
// their names. It also refuses (std::logic_error) a let, loop variable or allocation that rebinds a
// parameter's name: every scheduled kernel passes here, so none can hide a parameter.
#pragma once
#include "dsl/stmt.h"

namespace flow::dsl {

LoweredFunc canonical_value_names(const LoweredFunc& f);

}  // namespace flow::dsl

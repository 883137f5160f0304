// Note: unswitching loops on invariant choices between inputs (CPU pointwise kernels).
//
// cat lowers to a chain of selects between its inputs' reads: select(c < n0, a[..], select(c < n1,
// b[..], ...)). When the concatenated dim is not the innermost one (NCHW cat along channels, the
// common case), each condition is fixed for a whole task: it reads only variables bound outside the
// task's loops. Evaluated per element, the chain cost both compile time and run time: the LLVM
// generator evaluates only the chosen arm of a select holding loads, so every SIMD step branched,
// and the code grew with the inputs times the SIMD lanes (DenseNet-121: 25-input concatenations,
// ~1.3 s of LLVM time each, 17 s for the whole model's first call).
//
// unswitch_invariant_selects hoists such a condition out of the loops: `if (cond) loops[cond :=
// true] else loops[cond := false]`, repeated on both versions, so each version is a plain copy loop
// with contiguous vector loads. Only selects whose two arms both read memory qualify (a choice
// between inputs, not a pad's guard against a constant, which stays per element), and the number
// of versions is capped so that independent conditions cannot multiply the code beyond it.
#pragma once
#include <cstdint>
#include <vector>

#include "dsl/stmt.h"

namespace flow::sched {

// At most `max_versions` copies of `loops` come out (1 = unchanged).
dsl::Stmt unswitch_invariant_selects(const dsl::Stmt& loops, int max_versions = 64);

// The same choices along the loop's own index (cat along the innermost dim, NHWC cat along
// channels): the schedulers split the index range at the choices' bounds and resolve each piece's
// choices at compile time. read_choice_bounds lists the constants b of the conditions `index < b`
// of selects between two reads in `body` (sorted, distinct); resolve_read_choices replaces each
// such select by its arm for an index known to lie in [lo, hi).
std::vector<int64_t> read_choice_bounds(const dsl::Stmt& body, const dsl::Expr& index);
dsl::Stmt resolve_read_choices(const dsl::Stmt& body, const dsl::Expr& index, int64_t lo, int64_t hi);

}  // namespace flow::sched

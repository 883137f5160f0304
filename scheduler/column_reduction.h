// Note: the CPU schedule of a reduction whose rows are strided in memory while adjacent rows sit
// next to each other: the global average pool of channels-last data (mean over H and W of
// [N, H, W, C]: row c reads every C-th element), or a sum over dim 0 of a [N, F] matrix. The row
// schedule (one row per task, SIMD along the row) then gathers each element on its own and reads
// every cache line once per row in it. Here SIMD runs across W adjacent rows instead: lane l
// accumulates row base + l, and each step of the reduced loop is one contiguous vector load.
// Parallel tasks take tiles of W rows; the last tile overlaps its neighbour instead of running
// short, and kept extents below W take narrower tiles (W / 4, ..., 1). Sums are blocked: each lane adds kBlock elements into a
// partial, then the partial into its total, so rounding grows with kBlock + n / kBlock rather than
// with the row length n (the row schedule's W interleaved partials did the same job there).
// Groups with full-domain outputs (softmax-like) or value-and-index reductions keep the row
// schedule. GPU: not used (the row schedule's block per row stays; not measured on a device).
#pragma once
#include "dsl/stmt.h"
#include "scheduler/lowering.h"
#include "scheduler/params.h"

namespace flow::sched {

// Whether `ki` is such a reduction: every full-domain input is contiguous along the innermost kept
// dim and not along the innermost reduced dim, and every output is a row value.
bool column_reduction_fits(const KernelInstance& ki);

// The CPU body (at most p.cpu_vector_width rows per SIMD tile; cpu_rows_per_task does not apply).
dsl::Stmt lower_column_reduction_cpu(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p);

}  // namespace flow::sched

// Note: the CPU schedule of a reduction whose rows are strided in memory while adjacent rows sit
// next to each other: the global average pool of channels-last data (mean over H and W of
// [N, H, W, C]: row c reads every C-th element), or a sum over dim 0 of a [N, F] matrix. The row
// schedule (one row per task, SIMD along the row) then gathers each element on its own and reads
// every cache line once per row in it. Here SIMD runs across W adjacent rows instead: lane l
// accumulates row base + l, and each step of the reduced loop is one contiguous vector load.
// Parallel tasks take tiles of W rows; the last tile overlaps its neighbour instead of running
// short, and kept extents below W take narrower tiles (W / 4, ..., 1). Sums are blocked as in the
// row schedule (reduction_parts.h): each lane adds kSumBlock elements into a partial, then the
// partial into its total. Groups with full-domain outputs (softmax-like) or value-and-index
// reductions keep the row schedule.
//
// GPU: a block takes gpu_block_x adjacent rows, a thread column per row (a warp's loads are
// contiguous), and gpu_block_y threads split each row (thread ty sums elements ty, ty + block_y,
// ...); the partials meet in shared memory. The row schedule's block per row instead reads one
// element per row and thread, block_x rows apart. Chosen by gpu_block_y > 1 (the reduction
// scheduler's heuristics: many rows, a contiguous innermost kept extent of a warp or more).
#pragma once
#include "dsl/stmt.h"
#include "scheduler/lowering.h"
#include "scheduler/params.h"

namespace flow::sched {

// Whether `ki` is such a reduction: every full-domain input is contiguous along the innermost kept
// dim and not along the innermost reduced dim, and every output is a row value.
bool column_reduction_fits(const KernelInstance& ki);

// The column form's static shared memory: an X x Y buffer of partials per reduction of the group
// (all in scope at once).
int64_t column_shared_bytes(const KernelInstance& ki, int64_t block_x, int64_t block_y);
// A block's static shared memory, at most (CUDA's limit without the dynamic opt-in).
constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;

// Whether the GPU schedule of `ki` under `p` is the column form (lower_column_reduction_gpu): a
// column-form group under p's 2-d block whose partials fit kMaxStaticSharedBytes (a group of many
// reductions takes the row form instead).
bool gpu_column_form(const KernelInstance& ki, const ReductionParams& p);

// The GPU body; sets f's grid (gpu_block_x rows per block) and block (block_x by block_y threads).
dsl::Stmt lower_column_reduction_gpu(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p,
                                     dsl::LoweredFunc& f);

// The CPU body (at most p.cpu_vector_width rows per SIMD tile; cpu_rows_per_task does not apply).
dsl::Stmt lower_column_reduction_cpu(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p);

}  // namespace flow::sched

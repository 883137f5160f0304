// Note: lowering of the reductions that are not plain folds, for the reduction scheduler
// (scheduler/reduction_scheduler.cpp calls these; they are kept here so that file stays one idea):
//  - arg reductions (argmax/argmin, max_dim/min_dim): a (value, int64 index) accumulator pair,
//    updated together through one Let'd "take" predicate (NaN wins, first index wins ties, so the
//    merge is order-independent: CPU SIMD lanes and GPU threads combine in any order). The GPU
//    block combine is a shared-memory tree (power-of-two width P >= threads, padded with the
//    identity) with a Barrier after each level; the levels are unrolled, so every Barrier sits
//    directly in the thread body (the collective rule of dsl/stmt.h).
//  - scans (cumsum/cumprod): their own kernel. CPU: one parallel task per line, a serial running
//    accumulator storing every prefix. GPU: one thread per line (simple and correct; a block scan
//    would be faster for long lines and few rows: not done yet).
#pragma once
#include <functional>

#include "dsl/stmt.h"
#include "scheduler/lowering.h"
#include "scheduler/params.h"

namespace flow::sched {

// CPU: `row_loops(body)` builds the loops over the row and sets gv.red_idx before calling
// body(simd) (simd: lane `l` of `W`); appends the reduction of `node` to `scope` and binds its
// outputs as row values.
void emit_arg_reduction_cpu(const KernelInstance& ki, const KernelSignature& sig, GroupValues& gv, int node, int64_t W,
                            const std::vector<dsl::Expr>& kept_idx,
                            const std::function<dsl::Stmt(const std::function<dsl::Stmt(bool)>&)>& row_loops,
                            StmtList& scope);
// GPU: `strided(body)` builds the thread-strided loop over the row (gv indices set for body); T is
// the block size (threads on axis x, variable "tx").
void emit_arg_reduction_gpu(const KernelInstance& ki, const KernelSignature& sig, GroupValues& gv, int node, int64_t T,
                            const std::function<dsl::Stmt(const std::function<void(StmtList&)>&)>& strided,
                            StmtList& scope);

// A group that is one scan node.
bool is_scan_group(const KernelInstance& ki);
// The body of a scan kernel (fills f.grid / f.block for CUDA).
dsl::Stmt lower_scan(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p, dsl::Target t,
                     dsl::LoweredFunc& f);

}  // namespace flow::sched

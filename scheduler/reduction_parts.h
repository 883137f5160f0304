// Note: pieces every reduction schedule shares (scheduler/reduction_scheduler.cpp's row schedules
// and scheduler/column_reduction.cpp): what a reduction node folds, and how its accumulator
// becomes the node's value.
#pragma once
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "dsl/stmt.h"
#include "scheduler/lowering.h"

namespace flow::sched {

struct ReductionInfo {
  dsl::ReduceOp op;
  bool mean;
  dsl::DType acc;  // accumulation dtype
};

ReductionInfo reduction_info(const dsl::Graph& g, int node);
bool is_reduction_node(const dsl::Graph& g, int node);
// The group's reductions (node ids, in the group's order) in passes over the row: a reduction joins
// the pass of the one before it unless its input reads, directly or through ops of the group, a
// result of that pass or a row op after the pass began. So var's sum(d) and sum(d * d) are one pass
// (dsl/ops/moments.h), where each read the row again. Value-and-index reductions and scans run alone.
std::vector<std::vector<int>> reduction_passes(const KernelInstance& ki);

// Long reductions are blocked, as torch's cascade sums: each accumulator (a SIMD lane's, a GPU
// thread's) adds kSumBlock steps into a fresh partial, then the partial into its running total, so a
// float sum's rounding error grows with the blocks and kSumBlock, not with the row length.
constexpr int64_t kSumBlock = 256;

// Opens a block (partials reset to the identity) and closes it (partials added into their
// accumulators).
struct BlockStmts {
  dsl::Stmt open, close;
};

// A reduction of a pass as the schedules emit it: input and output values, accumulator `acc` and,
// for a blocked sum, partial `part` (local buffers named after the output).
struct PassReduction {
  int in, out;
  dsl::DType out_t;  // the node's output dtype
  ReductionInfo info;
  std::string acc, part;
  bool blocked;  // a sum: blocks of steps add into `part` first
};
std::vector<PassReduction> pass_reductions(const dsl::Graph& g, const std::vector<int>& pass);
// Allocates each reduction's accumulator (and partial, when blocked) of `size` elements in `scope`.
void allocate_accumulators(StmtList& scope, const std::vector<PassReduction>& rs, int64_t size);
// One step of r: its input at gv's current indices (as the node's output type, then the accumulator's)
// folded into buffer `into` at `index`.
dsl::Stmt fold_step(GroupValues& gv, const PassReduction& r, const std::string& into, const dsl::Expr& index);
// r's result from its accumulated `total` (finish_reduction), bound as the row value "v<out>" by a
// Let in `scope`.
void bind_result(StmtList& scope, GroupValues& gv, const KernelSignature& sig, const PassReduction& r,
                 const dsl::Expr& total);
// The pass's blocks: the partials of its blocked sums reset, then added into their accumulators,
// at `index`; empty (no partials) when none is blocked.
BlockStmts pass_blocks(const std::vector<PassReduction>& rs, const dsl::Expr& index);

// The steps [begin, begin + count) of loop `step` in blocks of kSumBlock (loop `block`), each
// between `blk.open` and `blk.close`; with `blk` empty (no partials), one plain loop of the steps.
dsl::Stmt blocked_steps(const std::string& block, const std::string& step, const dsl::Expr& begin,
                        const dsl::Expr& count, const dsl::Stmt& step_body, const BlockStmts& blk);

// The accumulator's final value as the node's output: divided by the row size for a mean, rounded
// through the output's storage dtype, in its compute dtype.
dsl::Expr finish_reduction(const ReductionInfo& info, dsl::Expr acc, const KernelSignature& sig, dsl::DType out);

}  // namespace flow::sched

// Note: pieces every reduction schedule shares (scheduler/reduction_scheduler.cpp's row schedules
// and scheduler/column_reduction.cpp): what a reduction node folds, and how its accumulator
// becomes the node's value.
#pragma once
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
// The accumulator's final value as the node's output: divided by the row size for a mean, rounded
// through the output's storage dtype, in its compute dtype.
dsl::Expr finish_reduction(const ReductionInfo& info, dsl::Expr acc, const KernelSignature& sig, dsl::DType out);

}  // namespace flow::sched

// Note: splitting a reduction over a few long rows into two reductions (the graph pass of
// DESIGN.md §1 that runs before fusion; TVM's rfactor and Inductor's split reductions do the same).
// The GPU reduction schedules give a row to one block (or a column of a tile to one thread), so
// `x.sum()` of 2^28 elements ran on one block of one SM. Here a reduction with few output elements
// (rows) and a long reduced extent N becomes
//
//   r1 = op(reshape(x, [..., S, N / S, ...]), dim of N / S)    rows * S rows of N / S: S blocks a row
//   r2 = op(r1, dim of S)                                      rows of S
//
// with S a divisor of N, so the reshape is a view and every chunk has N / S elements (mean of
// means is the mean). No workspace, atomics or second launch inside a kernel: the two reductions
// are ordinary groups, scheduled, fused, tuned and cached like any other.
//
// The reshape is pushed up through the elementwise ops that compute the reduction's input, down to
// graph inputs (dense over the reduced dims), values computed by other kernels (contiguous) and
// values constant over the reduced dims ([rows, 1] broadcast operands such as softmax's max), so
// r1's kernel computes `x * x` or `exp(x - m)` as it reads: the input is never written out.
// A reduction whose reduced dims are not consecutive, whose N has no fitting divisor, or whose
// input reaches an operand broadcast over only part of the reduced dims keeps its one kernel.
//
// Half-precision sums, means and products give r1 a float32 result and cast r2's, so the partials
// are not rounded to half (one rounding, as in the unsplit kernel); `dtype=` half on another input
// dtype still converts the input to half first. amax/amin/any/all are exact in any order; float
// sums add in another order (a tree of chunk sums: closer to exact, not further).
//
// Strided rows (kept dims after the reduced ones) aim r1 at the GPU column form's 8192 rows; it
// takes that form when its innermost kept extent is 32 or more, else a block per strided row.
//
// Only CUDA runs this pass (jit/compile.cpp): CPU reductions split a few long rows inside their
// kernel instead (reduction_scheduler.cpp, cpu_row_splits), without the extra pass over memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsl/graph.h"

namespace flow::sched {

struct SplitReductionOptions {
  int64_t max_rows = 512;   // split reductions with fewer output elements than this
  int64_t min_row = 65536;  // and at least this many elements reduced into each
  // r1's rows, rows * S: at most target_rows with the reduced dims last (~2 waves of 512-thread
  // blocks on a 132-SM GPU); with kept dims after them, at least column_target_rows where a divisor
  // allows (the GPU column form's threshold), else the most below it.
  int64_t target_rows = 1024;
  int64_t column_target_rows = 8192;
  int64_t min_chunk = 4096;        // N / S at least this (reduced dims last)
  int64_t column_min_chunk = 512;  // ... or this with kept dims after them
  int64_t min_splits = 2;          // no split into fewer chunks than this
  // Eager graphs address their scalar arguments by value id: when set, the pass leaves the graph as
  // it is unless the values before the first op result (eager's tensor and scalar arguments) keep
  // their ids. (Constants a composite adds come later; the replay may renumber those.)
  bool keep_leaf_ids = false;
};

struct SplitReductionResult {
  dsl::Graph graph;                // the rewritten graph; left empty when nothing split (split() == 0)
  std::vector<std::string> notes;  // one line per split reduction, for FLOW_LOG=fusion and explain()
  int split() const { return static_cast<int>(notes.size()); }  // reductions split in two
};

// `input_strides[i]` are graph input i's element strides (empty: contiguous). Graph inputs and
// outputs keep their order.
SplitReductionResult split_long_reductions(const dsl::Graph& g, const std::vector<std::vector<int64_t>>& input_strides,
                                           const SplitReductionOptions& opt = {});

}  // namespace flow::sched

// Note: the fusion pass, in one file: every rule deciding whether two pieces of work share a
// kernel lives in fusion.cpp. It follows TVM's pattern lattice in a simplified form: nodes are
// visited in topological order and each node tries to join the groups that produce its inputs.
//   - elementwise joins a pointwise group of the same shape (chains, diamonds, multi-output);
//   - elementwise joins a reduction group when its shape is the group's full domain or its
//     per-row (reduced) shape: producers fuse into the reduction's input, consumers into its
//     output, and a chain of reductions over the same rows (softmax, layer norm) becomes one
//     persistent-row kernel;
//   - a reduction absorbs the pointwise group producing its input (same domain) or joins a
//     reduction group over the same rows.
//   - a library op (conv, GEMM: OutEWiseFusable) starts a Library group; its elementwise consumers
//     join it as a post-op chain when scheduler/library_patterns.h says the library takes them.
// Every refused merge is recorded with a named reason; explain() prints them.
#pragma once
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "dsl/stmt.h"
#include "scheduler/library_patterns.h"

namespace flow::sched {

enum class GroupKind { Pointwise, Reduction, Opaque, Library };
const char* group_kind_name(GroupKind k);

struct FusionGroup {
  int id = -1;
  GroupKind kind = GroupKind::Pointwise;
  std::vector<int> nodes;            // topological order
  std::vector<int> inputs;           // values read from outside the group (incl. constants)
  std::vector<int> outputs;          // values used outside the group (graph outputs, other groups)
  dsl::Shape domain;                 // iteration domain (reduction: the shape before reducing)
  std::vector<int64_t> reduce_dims;  // Reduction groups: sorted dims of `domain` reduced
  // Library groups: nodes[0] is the library op (conv2d, matmul, ...), the rest its elementwise
  // epilogue chain, each node consuming the previous one's output; `epilogue` is that chain as
  // post-ops (scheduler/library_patterns.h). Library groups have no generated kernel.
  std::vector<EpilogueStep> epilogue;
  bool has_injective = false;  // holds an injective op (cat, pad, gather, ...): dims kept as is
  // Nodes (elementwise or injective) computed where an injective op of the group reads their value
  // (at its remapped indices), not over the domain: a relu feeding only a cat is computed inside the
  // cat's kernel (sorted node ids; see inline_fits in fusion.cpp).
  std::vector<int> inlined;
};

struct RejectedMerge {
  int producer_node = -1;
  int consumer_node = -1;
  std::string reason;
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in an executable (topological) order
  std::vector<RejectedMerge> rejected;
  std::string to_string(const dsl::Graph& g) const;
};

// Which elementwise epilogues join library calls as post-ops.
enum class LibraryEpilogues {
  None,     // none: every epilogue is a generated kernel
  Exact,    // the eltwise post-ops that match torch on NaN and +-inf too (is_exact_post_op,
            // scheduler/library_patterns.h)
  Eltwise,  // every eltwise post-op: faster, but NaN and +-inf may come out differently
  All,      // also binary ops with a tensor (residual adds, per-channel scales)
};
// FLOW_LIBRARY_EPILOGUES: "0" None, unset or "exact" Exact, "eltwise" Eltwise, "1" or "all" All.
LibraryEpilogues library_epilogues_default();

bool inline_producers_default();  // FLOW_FUSE_INLINE, default on

struct FusionOptions {
  bool enable = true;                     // false: one group per node (eager mode, debugging)
  int max_buffers = 64;                   // kernel argument cap (NVRTC parameter space and launch limits)
  dsl::Target target = dsl::Target::CPU;  // which library epilogues exist (library_patterns.h)
  // Fuse elementwise epilogues into library calls as post-ops, saving a pass over the output. By
  // default only the exact eltwise ones (see LibraryEpilogues). Binary post-ops are off by default:
  // with Debian's oneDNN 2.6 a 1x1 convolution with a per-channel binary post-op measured 6x slower
  // (48 ms) than the plain convolution followed by one generated epilogue kernel (8 ms), and
  // ResNet-50's convolutions with a residual [add, relu] chain 4-15x slower.
  LibraryEpilogues library_epilogues = library_epilogues_default();
  // Per graph value: computed from frozen inputs only (scheduler/frozen.h). Frozen and per-call
  // nodes never share a group. Empty: nothing is frozen.
  std::vector<bool> frozen;
  // Compute elementwise (and data-movement) producers inside the injective op that alone reads them
  // (FusionGroup::inlined). FLOW_FUSE_INLINE=0 turns it off (A/B measurements, debugging).
  bool inline_producers = inline_producers_default();
};

FusionPlan fuse(const dsl::Graph& g, const FusionOptions& opt = {});

// Value level inside a reduction group: the full domain, or one value per row.
bool is_row_shape(const FusionGroup& grp, const dsl::Shape& s);  // keepdim or reduced shape
dsl::Shape keepdim_shape(const FusionGroup& grp);
dsl::Shape reduced_shape(const FusionGroup& grp);

}  // namespace flow::sched

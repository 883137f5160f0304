// Note: frozen values. A compiled model reads two kinds of tensors: per-call ones (its arguments)
// and ones that stay the same from call to call (its parameters and buffers). Work that depends on
// frozen inputs only (eval-mode batch-norm scale and shift, weights with the batch-norm scale folded
// in) gives the same result every call until a parameter is written, so the executable computes it
// once and caches it (jit/compile.h), and passes fold per-call work into it (scheduler/
// fold_scale.h). Which inputs are frozen is the caller's statement (flow.jit: the module's
// parameters and buffers and captured tensors that the function does not write); the executable
// still checks each frozen input's storage identity and version on every run, so a parameter
// written in place or replaced is seen.
#pragma once
#include <vector>

#include "dsl/graph.h"

namespace flow::sched {

// frozen[v] for every value of `g`: v is a frozen input, or is computed by ops whose inputs are all
// frozen (constants count as frozen when any input is frozen, so a graph with no frozen input has
// no frozen value). `frozen_inputs` holds one flag per graph input (in graph-input order) or is empty.
std::vector<bool> frozen_values(const dsl::Graph& g, const std::vector<bool>& frozen_inputs);

}  // namespace flow::sched

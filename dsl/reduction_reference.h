// Note: the graph interpreter's evaluation of the reductions that are not plain folds: value-and-
// index reductions (ReduceSpec::arg: argmax/argmin, max_dim/min_dim) and scans (ReduceSpec::scan:
// cumsum/cumprod). Kept out of graph_interpreter.cpp so that file stays one idea; semantics as
// dsl/op_table.h's ReduceSpec says (first occurrence wins ties, a NaN wins, index row-major over
// the reduced dims; a scan folds in the accumulation dtype and rounds each prefix to the output).
#pragma once
#include <vector>

#include "dsl/graph_interpreter.h"
#include "dsl/op_table.h"

namespace flow::dsl {

// The outputs of node `n` (an arg reduction or a scan) for input `x`, in n.outputs order.
std::vector<HostTensor> run_arg_or_scan(const Graph& g, const Node& n, const OpDef& def, const HostTensor& x,
                                        bool float64_math);

}  // namespace flow::dsl

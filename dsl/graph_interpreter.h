// Note: the reference interpreter for tensor-level graphs, the oracle of the whole pipeline (every
// scheduler, backend and the Python API are checked against it). It derives everything from the op
// table: an elementwise op's compute Expr is built once over Vars "in0", "in1", ... (each of its
// input's compute dtype) and evaluated per output element with eval_expr (dsl/interpreter.h), so it
// shares the loop-level interpreter's scalar semantics exactly; a reduction folds with
// reduce_identity/reduce_combine of its ReduceSpec in the accumulation dtype.
//
// Values are held as doubles whatever their dtype, contiguous and row-major, and rounded to their
// dtype at every op output (float32 via float, halves round-to-nearest-even, ints wrap, bool 0/1).
// float64_math = true evaluates every floating op in double and skips the rounding of floating
// outputs (the high-precision oracle); integer and bool results are exact either way.
#pragma once
#include <vector>

#include "dsl/graph.h"

namespace flow::dsl {

struct HostTensor {
  TensorType type;
  std::vector<double> data;  // numel(type.shape) values, row-major
};

// Runs `g` on `inputs` (in Graph::inputs() order, types equal to the inputs'); returns the values of
// Graph::outputs(). Input data is first rounded to its dtype. Throws std::invalid_argument on a
// mismatched input, std::runtime_error from evaluation (integer division by zero).
std::vector<HostTensor> interpret_graph(const Graph& g, const std::vector<HostTensor>& inputs,
                                        bool float64_math = false);

// A double rounded to what dtype `t` can hold (the interpreter's storage rule): float32 via float,
// float16/bfloat16 round-to-nearest-even, ints truncate then wrap, bool is x != 0 (NaN is true).
// float64_math leaves floating values as they are.
double round_to_dtype(DType t, double v, bool float64_math = false);

}  // namespace flow::dsl

// Note: reference implementations of the library ops (matmul, linear, conv2d, conv_transpose2d, conv3d,
// conv_transpose3d, argsort, scatter, embedding_bag) for the graph interpreter: naive loops accumulating in double
// (argsort: a std::stable_sort of each line, on the values as doubles; scatter: the index's
// positions in row-major order, serially; embedding_bag: each bag's positions in order), the result rounded to the
// output dtype like every other interpreted op (kept in double with float64_math). They are the oracle of the oneDNN
// path, and the CPU executor's float64 path (oneDNN has no f64 matmul/conv) calls them too.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "dsl/graph_interpreter.h"

namespace flow::dsl {

// embedding_bag's data checks, torch's messages (the CPU executor raises the same): the bag
// boundaries offset(0..bags) start at 0, do not pass `positions` and never decrease (no check when
// there are no bags); an index outside [0, rows) at position `p`. Both throw OpError(Value).
void check_embedding_bag_offsets(const std::function<int64_t(int64_t)>& offset, int64_t bags, int64_t positions);
[[noreturn]] void throw_embedding_bag_index(int64_t position, int64_t value, int64_t rows);

// True for ops this file implements.
bool has_library_reference(const std::string& op);

// Runs library node `n` of `g` on its inputs (contiguous row-major, in node-input order).
HostTensor run_library_reference(const Graph& g, const Node& n, const std::vector<const HostTensor*>& in,
                                 bool float64_math);

}  // namespace flow::dsl

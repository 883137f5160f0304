// Note: rebuilding a graph with some nodes replaced (the graph passes that fold ops into others).
// Nodes are appended in topological order and never edited in place, so a pass replays the graph:
// the inputs (same order and names) and constants first, then every node either copied as it is
// (same op, attrs and output types, no re-inference) or replaced by new ops, with `map` taking old
// value ids to new ones. Value ids change; graph-input and graph-output order do not.
#pragma once
#include <vector>

#include "dsl/graph.h"

namespace flow::dsl {

class GraphReplay {
 public:
  explicit GraphReplay(const Graph& from);
  Graph& out() { return out_; }
  int operator[](int old_value) const { return map_.at(old_value); }          // the new id of an old value
  void set(int old_value, int new_value) { map_.at(old_value) = new_value; }  // `old_value` is replaced
  void copy(const Node& n);                                                   // appends `n` on the mapped inputs
  Graph finish();  // marks the mapped outputs; returns the new graph

 private:
  const Graph& from_;
  Graph out_;
  std::vector<int> map_;
};

}  // namespace flow::dsl

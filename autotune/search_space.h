// Note: the search space of a kernel is a grid over its scheduler's Params knobs (the ones its
// target reads), as TVM's and Triton's autotuners do: each knob has a short list of values, and a
// point of the grid overrides those fields of the heuristic Params (fields of the other target keep
// their heuristic values). Points no kernel can run with (sched::params_problem: more than 1024
// threads per block) and those `valid` refuses (vector accesses wider than 16 bytes) are skipped. Strategies
// (autotune/strategy.h) walk the grid by index vectors, so they know nothing about what a knob means.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsl/stmt.h"
#include "scheduler/kernel_instance.h"
#include "scheduler/params.h"

namespace flow::autotune {

struct Knob {
  std::string name;  // a Params JSON field
  std::vector<int64_t> values;
};

struct SearchSpace {
  std::string base_json;  // params_to_json of the Params the grid points start from
  std::vector<Knob> knobs;
  std::function<bool(const sched::Params&)> valid;  // empty: every point is valid

  // Number of grid points (valid or not).
  size_t size() const;
  // The Params at one grid point (idx[i] indexes knobs[i].values).
  sched::Params at(const std::vector<int>& idx) const;
  // Whether a kernel can run with p (sched::params_problem) and `valid` accepts it.
  bool is_valid(const sched::Params& p) const { return sched::params_problem(p).empty() && (!valid || valid(p)); }
  // The i-th grid point in row-major order (knobs[0] slowest).
  std::vector<int> unflatten(size_t i) const;
};

// The space of one kernel for a target, around the scheduler's heuristic Params `start`.
SearchSpace search_space(const sched::KernelInstance& ki, const sched::Params& start, dsl::Target t);

}  // namespace flow::autotune

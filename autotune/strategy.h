// Note: search strategies over a SearchSpace. The starting Params (the heuristic choice) is always
// measured first: it is the baseline of every speedup, and a search cut short by its budget still
// returns something no worse than the default. Each distinct Params is measured at most once.
//   exhaustive    every valid grid point in order (small spaces);
//   random        valid grid points in a seeded random order;
//   evolutionary  a random initial population, then children that change one knob of one of the
//                 best points so far (to a neighbouring value half the time, else any value);
//   auto          exhaustive when the space has at most 64 points, else evolutionary.
// The budget is wall-clock seconds (cost evaluations, i.e. compile plus measurement, included) and
// optionally a cap on evaluations; a search stops early when every valid point has been measured.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "autotune/search_space.h"
#include "scheduler/params.h"

namespace flow::autotune {

enum class Strategy { Auto, Exhaustive, Random, Evolutionary };
const char* strategy_name(Strategy s);
Strategy parse_strategy(const std::string& name);  // throws std::invalid_argument

// Seconds per launch of a candidate, or nullopt with *error set when it cannot be built or run.
using CostFn = std::function<std::optional<double>(const sched::Params& p, std::string* error)>;

struct SearchBudget {
  double seconds = 10.0;
  int max_trials = 0;  // 0: no cap
};

struct Trial {
  sched::Params params;
  std::optional<double> cost;
  std::string error;
};

struct SearchResult {
  sched::Params best;
  double best_cost = std::numeric_limits<double>::infinity();
  std::optional<double> start_cost;  // the baseline (nullopt if it failed)
  std::vector<Trial> trials;         // in evaluation order, the start first
  int failed = 0;
  std::string strategy;  // the one that ran (auto resolved)
  bool exhausted = false;  // every valid point was measured
};

SearchResult search(const SearchSpace& space, const sched::Params& start, const CostFn& cost, Strategy strategy,
                    const SearchBudget& budget, uint64_t seed);

}  // namespace flow::autotune

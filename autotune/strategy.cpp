#include "autotune/strategy.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>

#include "autotune/json.h"

namespace flow::autotune {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::Auto:
      return "auto";
    case Strategy::Exhaustive:
      return "exhaustive";
    case Strategy::Random:
      return "random";
    case Strategy::Evolutionary:
      return "evolutionary";
  }
  return "?";
}

Strategy parse_strategy(const std::string& name) {
  for (Strategy s : {Strategy::Auto, Strategy::Exhaustive, Strategy::Random, Strategy::Evolutionary})
    if (name == strategy_name(s)) return s;
  throw std::invalid_argument("unknown tuning strategy '" + name +
                              "' (expected auto, exhaustive, random or evolutionary)");
}

namespace {

using Clock = std::chrono::steady_clock;

class Searcher {
 public:
  Searcher(const SearchSpace& space, const CostFn& cost, const SearchBudget& budget)
      : space_(space), cost_(cost), budget_(budget), t0_(Clock::now()) {}

  bool out_of_budget() const {
    if (budget_.max_trials > 0 && static_cast<int>(result.trials.size()) >= budget_.max_trials) return true;
    return std::chrono::duration<double>(Clock::now() - t0_).count() >= budget_.seconds;
  }

  // Measures `p` unless it was measured before or is invalid; returns whether it was measured.
  bool evaluate(const sched::Params& p) {
    const std::string id = sched::params_to_json(p);
    if (seen_.count(id) || !space_.is_valid(p)) return false;
    seen_.insert(id);
    Trial t{p, std::nullopt, ""};
    t.cost = cost_(p, &t.error);
    if (!t.cost) ++result.failed;
    if (t.cost && *t.cost < result.best_cost) {
      result.best_cost = *t.cost;
      result.best = p;
    }
    result.trials.push_back(std::move(t));
    return true;
  }

  bool seen(const sched::Params& p) const { return seen_.count(sched::params_to_json(p)) > 0; }

  SearchResult result;

 private:
  const SearchSpace& space_;
  const CostFn& cost_;
  SearchBudget budget_;
  Clock::time_point t0_;
  std::set<std::string> seen_;
};

size_t count_valid(const SearchSpace& space) {
  size_t n = 0;
  for (size_t i = 0; i < space.size(); ++i) n += space.is_valid(space.at(space.unflatten(i))) ? 1 : 0;
  return n;
}

}  // namespace

SearchResult search(const SearchSpace& space, const sched::Params& start, const CostFn& cost, Strategy strategy,
                    const SearchBudget& budget, uint64_t seed) {
  const size_t n = space.size();
  const size_t valid = count_valid(space);
  if (strategy == Strategy::Auto) strategy = valid <= 64 ? Strategy::Exhaustive : Strategy::Evolutionary;
  Searcher s(space, cost, budget);
  s.result.strategy = strategy_name(strategy);
  s.result.best = start;
  // The baseline, always (even when it is not a grid point or the space has no valid point).
  {
    Trial t{start, std::nullopt, ""};
    t.cost = cost(start, &t.error);
    s.result.start_cost = t.cost;
    if (t.cost) s.result.best_cost = *t.cost;
    else ++s.result.failed;
    s.result.trials.push_back(t);
  }
  std::set<std::string> start_id{sched::params_to_json(start)};
  std::mt19937_64 rng(seed);
  auto grid_seen = [&] {
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      const sched::Params p = space.at(space.unflatten(i));
      if (space.is_valid(p) && (s.seen(p) || start_id.count(sched::params_to_json(p)))) ++k;
    }
    return k;
  };
  // The start is "seen" for grid purposes too.
  auto evaluate = [&](const sched::Params& p) {
    if (start_id.count(sched::params_to_json(p))) return false;
    return s.evaluate(p);
  };

  if (space.knobs.empty()) {
    s.result.exhausted = true;
    return s.result;
  }
  if (strategy == Strategy::Exhaustive || strategy == Strategy::Random) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    if (strategy == Strategy::Random) std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      if (s.out_of_budget()) break;
      evaluate(space.at(space.unflatten(i)));
    }
  } else {
    // Evolutionary.
    const size_t population = 8;
    std::uniform_int_distribution<size_t> any_point(0, n - 1);
    for (int attempts = 0; attempts < 200 && s.result.trials.size() < population && !s.out_of_budget(); ++attempts)
      evaluate(space.at(space.unflatten(any_point(rng))));
    while (!s.out_of_budget() && grid_seen() < valid) {
      // Parents: the four best measured grid points.
      std::vector<const Trial*> ranked;
      for (const Trial& t : s.result.trials)
        if (t.cost) ranked.push_back(&t);
      std::sort(ranked.begin(), ranked.end(), [](const Trial* a, const Trial* b) { return *a->cost < *b->cost; });
      bool measured = false;
      for (int attempt = 0; attempt < 64 && !measured; ++attempt) {
        std::vector<int> idx;
        if (ranked.empty()) {
          idx = space.unflatten(any_point(rng));
        } else {
          const Trial* parent = ranked[std::uniform_int_distribution<size_t>(0, std::min<size_t>(4, ranked.size()) - 1)(rng)];
          // The parent's grid index (the start may be off-grid: then its nearest values per knob).
          const std::string pj = sched::params_to_json(parent->params);
          const Json pjson = Json::parse(pj);
          for (const Knob& k : space.knobs) {
            const int64_t v = pjson.find(k.name) ? pjson.at(k.name).as_int() : k.values[0];
            size_t best = 0;
            for (size_t i = 1; i < k.values.size(); ++i)
              if (std::llabs(k.values[i] - v) < std::llabs(k.values[best] - v)) best = i;
            idx.push_back(static_cast<int>(best));
          }
          const size_t knob = std::uniform_int_distribution<size_t>(0, space.knobs.size() - 1)(rng);
          const int nv = static_cast<int>(space.knobs[knob].values.size());
          if (nv > 1) {
            if (rng() % 2) {
              const int step = rng() % 2 ? 1 : -1;
              idx[knob] = std::clamp(idx[knob] + step, 0, nv - 1);
            } else {
              idx[knob] = static_cast<int>(std::uniform_int_distribution<int>(0, nv - 1)(rng));
            }
          }
        }
        measured = evaluate(space.at(idx));
      }
      if (!measured) {  // stuck around the best points: any unmeasured point
        for (size_t i = 0; i < n && !measured && !s.out_of_budget(); ++i) measured = evaluate(space.at(space.unflatten(i)));
        if (!measured) break;
      }
    }
  }
  s.result.exhausted = grid_seen() >= valid;
  return s.result;
}

}  // namespace flow::autotune

#include "autotune/tuner.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "autotune/search_space.h"
#include "jit/cuda_launch.h"
#include "jit/log.h"
#include "runtime/cuda_driver.h"
#include "scheduler/scheduler.h"
#include "scheduler/workload_key.h"

namespace flow::autotune {

namespace {

using Clock = std::chrono::steady_clock;

struct Winner {
  std::shared_ptr<const jit::CompiledKernel> kernel;
  std::vector<sched::KernelArg> args;
};

std::string domain_of(const sched::KernelInstance& ki) {
  return "kept " + dsl::shape_str(ki.kept) + " reduced " + dsl::shape_str(ki.reduced);
}

}  // namespace

std::vector<KernelTuneResult> tune_executable(jit::Executable& exe, const std::vector<jit::Tensor>& inputs,
                                              const TuneOptions& opt, const TuningDatabase* existing,
                                              const TuneProgress& progress) {
  const jit::CompileOptions& copt = exe.options();
  const dsl::Target t = copt.target;
  const bool cuda = t == dsl::Target::CUDA;
  const std::string target = jit::target_id(copt);
  const size_t nk = exe.kernels().size();

  // Workloads in kernel order, and which kernels share each.
  std::vector<std::string> key(nk);
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> users;
  for (size_t k = 0; k < nk; ++k) {
    key[k] = sched::workload_key(exe.instance(k), t);
    if (!users.count(key[k])) order.push_back(key[k]);
    users[key[k]].push_back(k);
  }
  std::map<std::string, Winner> winners;
  std::map<std::string, size_t> result_index;
  std::vector<KernelTuneResult> results;
  const auto t0 = Clock::now();
  size_t done = 0;

  auto new_result = [&](size_t k) {
    KernelTuneResult r;
    const auto& ki = exe.instance(k);
    r.kernel = k;
    r.uses = static_cast<int>(users[key[k]].size());
    r.name = exe.kernels()[k]->scheduled.func.name;
    r.workload = key[k];
    r.scheduler = exe.kernels()[k]->scheduled.scheduler;
    r.domain = domain_of(ki);
    r.default_params = sched::params_to_json(exe.kernels()[k]->scheduled.params);
    return r;
  };

  // A workload with a record: schedule it with the record's Params (no measurement).
  auto apply_record = [&](size_t k, const TuningRecord& rec) {
    KernelTuneResult r = new_result(k);
    r.status = "record";
    r.best_params = rec.params_json;
    r.default_us = rec.default_us;
    r.best_us = rec.best_us;
    r.record = rec;
    const sched::Scheduler& s = sched::scheduler_for(exe.instance(k), t);
    const sched::ScheduledKernel sk = s.schedule(exe.instance(k), sched::params_from_json(rec.params_json), t);
    winners[key[k]] = Winner{jit::get_kernel(sk, copt), sk.args};
    return r;
  };

  auto tune_one = [&](size_t k, const std::vector<const jit::Tensor*>& values) {
    const auto& ki = exe.instance(k);
    const auto start_time = Clock::now();
    KernelTuneResult r = new_result(k);
    const sched::Scheduler& s = sched::scheduler_for(ki, t);
    const sched::Params start = exe.kernels()[k]->scheduled.params;
    const SearchSpace space = search_space(ki, start, t);
    std::map<std::string, Winner> built;  // params JSON -> kernel
    const CostFn cost = [&](const sched::Params& p, std::string* error) -> std::optional<double> {
      try {
        const sched::ScheduledKernel sk = s.schedule(ki, p, t);
        auto kernel = jit::get_kernel(sk, copt);
        const Measurement m = measure(
            [&] {
              if (cuda) jit::launch_cuda(*kernel, sk.args, values);
              else jit::launch_cpu(*kernel, sk.args, values);
            },
            MeasureOptions{opt.measure.warmup, opt.measure.repeats, opt.measure.time_limit_seconds,
                           opt.measure.min_sample_seconds, cuda});
        if (!m.ok) {
          *error = m.error;
          return std::nullopt;
        }
        built[sched::params_to_json(p)] = Winner{kernel, sk.args};
        return m.median_seconds;
      } catch (const std::exception& e) {
        *error = e.what();
        return std::nullopt;
      }
    };
    const size_t left = order.size() - done;
    const double remaining = opt.budget_seconds - std::chrono::duration<double>(Clock::now() - t0).count();
    SearchBudget budget{std::max(0.0, remaining / static_cast<double>(std::max<size_t>(1, left))),
                        opt.max_trials_per_kernel};
    const SearchResult sr = search(space, start, cost, opt.strategy, budget, opt.seed ^ std::hash<std::string>{}(key[k]));
    r.strategy = sr.strategy;
    r.candidates = static_cast<int>(sr.trials.size());
    r.failed = sr.failed;
    for (const Trial& tr : sr.trials)
      if (!tr.cost) r.errors.push_back(sched::params_to_json(tr.params) + ": " + tr.error);
    r.seconds = std::chrono::duration<double>(Clock::now() - start_time).count();
    if (!sr.start_cost) {
      r.status = "failed";  // the default itself did not run: keep it, record nothing
      return r;
    }
    r.status = "tuned";
    r.default_us = *sr.start_cost * 1e6;
    r.best_us = sr.best_cost * 1e6;
    r.best_params = sched::params_to_json(sr.best);
    winners[key[k]] = built.at(r.best_params);
    TuningRecord& rec = r.record;
    rec.workload = key[k];
    rec.target = target;
    rec.scheduler = r.scheduler;
    rec.params_json = r.best_params;
    rec.default_params_json = r.default_params;
    rec.best_us = r.best_us;
    rec.default_us = r.default_us;
    rec.kernel = r.name;
    rec.domain = r.domain;
    rec.candidates = r.candidates;
    rec.failed = r.failed;
    rec.tuning_seconds = r.seconds;
    rec.strategy = r.strategy;
    rec.time = utc_now();
    rec.host = host_name();
    return r;
  };

  auto finish = [&](KernelTuneResult r) {
    result_index[r.workload] = results.size();
    results.push_back(std::move(r));
    ++done;
    if (jit::log_enabled("tuning")) {
      const KernelTuneResult& x = results.back();
      jit::log_line("tuning", x.name + " " + x.status + ": " + std::to_string(x.default_us) + " us -> " +
                                  std::to_string(x.best_us) + " us, " + x.best_params);
    }
    if (progress) progress(results.back(), done, order.size());
  };

  // Workloads that have records need no run.
  for (const std::string& w : order) {
    const TuningRecord* rec = existing ? existing->best(w, target) : nullptr;
    if (rec && rec->scheduler == exe.kernels()[users[w][0]]->scheduled.scheduler) finish(apply_record(users[w][0], *rec));
  }
  if (done < order.size()) {
    exe.run_with_hook(inputs, [&](size_t k, const std::vector<const jit::Tensor*>& values) {
      if (result_index.count(key[k])) return;
      finish(tune_one(k, values));
    });
  }
  for (size_t k = 0; k < nk; ++k) {
    auto it = winners.find(key[k]);
    if (it == winners.end()) continue;
    const std::string origin = results[result_index.at(key[k])].status == "record" ? "record" : "tuned";
    exe.replace_kernel(k, it->second.kernel, it->second.args, origin);
  }
  return results;
}

}  // namespace flow::autotune

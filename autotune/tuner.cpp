#include "autotune/tuner.h"

#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "autotune/json.h"
#include "autotune/search_space.h"
#include "autotune/verify.h"
#include "jit/cuda_launch.h"
#include "jit/library_ops.h"
#include "jit/log.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_driver.h"
#include "scheduler/scheduler.h"
#include "scheduler/workload_key.h"

namespace flow::autotune {

namespace {

using Clock = std::chrono::steady_clock;

std::string domain_of(const sched::KernelInstance& ki) {
  return "kept " + dsl::shape_str(ki.kept) + " reduced " + dsl::shape_str(ki.reduced);
}

// The storage of one output of a kernel, copied to the host.
struct OutputSnapshot {
  int value = -1;
  dsl::DType dtype = dsl::DType::Float32;
  std::vector<unsigned char> bytes;
};

std::vector<unsigned char> host_copy(const jit::Tensor& t, bool cuda) {
  std::vector<unsigned char> out(t.storage->size());
  if (out.empty()) return out;
  if (cuda)
    runtime::cuda::copy_device_to_host(out.data(), t.storage->data(), out.size());
  else
    std::memcpy(out.data(), t.storage->data(), out.size());
  return out;
}

std::vector<OutputSnapshot> snapshot_outputs(const sched::KernelInstance& ki,
                                             const std::vector<const jit::Tensor*>& values, bool cuda) {
  std::vector<OutputSnapshot> out;
  for (const sched::KernelBuffer& b : ki.buffers) {
    if (!b.is_output || b.value < 0 || static_cast<size_t>(b.value) >= values.size()) continue;
    const jit::Tensor* t = values[static_cast<size_t>(b.value)];
    if (!t || !t->storage) continue;
    out.push_back({b.value, b.dtype, host_copy(*t, cuda)});
  }
  return out;
}

// Fills the outputs in `reference` with all-ones bytes (a NaN in every float type), so a candidate
// that leaves elements unwritten cannot pass on the default's (or an earlier candidate's) values.
void poison_outputs(const std::vector<OutputSnapshot>& reference, const std::vector<const jit::Tensor*>& values,
                    bool cuda) {
  for (const OutputSnapshot& ref : reference) {
    const jit::Tensor& t = *values[static_cast<size_t>(ref.value)];
    if (cuda)
      runtime::cuda::memset_device(t.storage->data(), 0xFF, t.storage->size());
    else
      std::memset(t.storage->data(), 0xFF, t.storage->size());
  }
}

// "" when the outputs now hold what `reference` holds (autotune/verify.h), else why not.
std::string check_outputs(const std::vector<OutputSnapshot>& reference, const std::vector<const jit::Tensor*>& values,
                          bool cuda) {
  for (const OutputSnapshot& ref : reference) {
    const std::vector<unsigned char> now = host_copy(*values[static_cast<size_t>(ref.value)], cuda);
    if (now.size() != ref.bytes.size()) return "wrong result: an output changed size";
    const std::string bad = compare_outputs(ref.bytes.data(), now.data(), now.size(), ref.dtype);
    if (!bad.empty()) return bad;
  }
  return "";
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
  // Parameter-only kernels and library calls (computed once and cached, jit/compile.h) are not
  // worth tuning: they are skipped.
  auto cached = [&](int group) { return exe.group_cached(static_cast<size_t>(group)); };
  for (size_t k = 0; k < nk; ++k) {
    if (cached(exe.kernel_group(k))) continue;
    key[k] = sched::workload_key(exe.instance(k), t);
    if (!users.count(key[k])) order.push_back(key[k]);
    users[key[k]].push_back(k);
  }
  // Library calls with a choice of implementation (oneDNN, cuDNN); the float64 reference loops and
  // flow's own sort (jit/sort_op.h) have none.
  const auto& steps = exe.library_steps();
  std::vector<std::string> lib_order;
  std::map<std::string, std::vector<size_t>> lib_users;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].has_choices || steps[i].workload.empty() || cached(steps[i].group)) continue;
    if (!lib_users.count(steps[i].workload)) lib_order.push_back(steps[i].workload);
    lib_users[steps[i].workload].push_back(i);
  }
  std::map<std::string, std::string> lib_winners;  // workload -> impl
  // workload -> the winning Params. Each kernel of the workload is scheduled with them on its own
  // instance at the end: kernels that share a workload share the compiled kernel (same key) but not
  // their buffers, so one kernel's launch arguments must never be given to another.
  std::map<std::string, sched::Params> winners;
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
    const sched::Params p = sched::params_from_json(rec.params_json);
    jit::get_kernel(s.schedule(exe.instance(k), p, t), copt);  // compiled (or loaded) now, errors here
    winners[key[k]] = p;
    return r;
  };

  auto fill_record = [&](KernelTuneResult& r) {
    TuningRecord& rec = r.record;
    rec.workload = r.workload;
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
  };

  auto tune_one = [&](size_t k, const std::vector<const jit::Tensor*>& values) -> KernelTuneResult {
    const auto& ki = exe.instance(k);
    const auto start_time = Clock::now();
    KernelTuneResult r = new_result(k);
    const sched::Scheduler& s = sched::scheduler_for(ki, t);
    const sched::Params start = exe.kernels()[k]->scheduled.params;
    const SearchSpace space = search_space(ki, start, t);
    auto launch = [&](const jit::CompiledKernel& kernel, const std::vector<sched::KernelArg>& args) {
      if (cuda)
        jit::launch_cuda(kernel, args, values);
      else
        jit::launch_cpu(kernel, args, values);
    };
    // What every candidate must reproduce: the default schedule's outputs (autotune/verify.h). If
    // the default itself fails, every candidate fails with that error (nothing unverified wins).
    std::vector<OutputSnapshot> reference;
    std::string reference_error;
    try {
      const sched::ScheduledKernel sk = s.schedule(ki, start, t);
      launch(*jit::get_kernel(sk, copt), sk.args);
      reference = snapshot_outputs(ki, values, cuda);
    } catch (const std::exception& e) {
      reference_error = std::string("no reference: the default schedule failed: ") + e.what();
    }
    const CostFn cost = [&](const sched::Params& p, std::string* error) -> std::optional<double> {
      if (!reference_error.empty()) {
        *error = reference_error;
        return std::nullopt;
      }
      try {
        const sched::ScheduledKernel sk = s.schedule(ki, p, t);
        auto kernel = jit::get_kernel(sk, copt);
        poison_outputs(reference, values, cuda);
        const Measurement m =
            measure([&] { launch(*kernel, sk.args); },
                    MeasureOptions{opt.measure.warmup, opt.measure.repeats, opt.measure.time_limit_seconds,
                                   opt.measure.min_sample_seconds, cuda});
        if (!m.ok) {
          *error = m.error;
          return std::nullopt;
        }
        if (const std::string wrong = check_outputs(reference, values, cuda); !wrong.empty()) {
          *error = wrong;
          return std::nullopt;
        }
        return m.median_seconds;
      } catch (const std::exception& e) {
        *error = e.what();
        return std::nullopt;
      }
    };
    const size_t left = order.size() + lib_order.size() - done;
    const double remaining = opt.budget_seconds - std::chrono::duration<double>(Clock::now() - t0).count();
    SearchBudget budget{std::max(0.0, remaining / static_cast<double>(std::max<size_t>(1, left))),
                        opt.max_trials_per_kernel};
    const SearchResult sr =
        search(space, start, cost, opt.strategy, budget, opt.seed ^ std::hash<std::string>{}(key[k]));
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
    winners[key[k]] = sr.best;
    fill_record(r);
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
    if (progress) progress(results.back(), done, order.size() + lib_order.size());
  };

  auto impl_json = [](const std::string& impl) {
    Json::Object o;
    o.emplace_back("kind", Json("library"));
    o.emplace_back("impl", Json(impl));
    return Json(std::move(o)).dump();
  };
  auto lib_result = [&](size_t i) {
    KernelTuneResult r;
    const jit::LibraryStep& st = steps[i];
    r.kernel = i;
    r.uses = static_cast<int>(lib_users[st.workload].size());
    r.name = st.describe();
    r.workload = st.workload;
    r.scheduler = st.library;
    r.domain = dsl::shape_str(exe.graph().value(st.output).type.shape);
    return r;
  };
  // One library call: every implementation the library offers for it, timed on the real operands.
  auto tune_library = [&](size_t i, const std::vector<const jit::Tensor*>& values) {
    const auto start_time = Clock::now();
    KernelTuneResult r = lib_result(i);
    r.strategy = "exhaustive";
    jit::LibraryStep step = steps[i];
    step.impl.clear();
    runtime::onednn::ImplInfo info;
    jit::run_library_group(exe.graph(), step, values, &info);
    const size_t left = order.size() + lib_order.size() - done;
    const double remaining = opt.budget_seconds - std::chrono::duration<double>(Clock::now() - t0).count();
    const double budget = std::max(0.0, remaining / static_cast<double>(std::max<size_t>(1, left)));
    // oneDNN's reference implementations ("ref:any") are correctness fallbacks, never faster beyond
    // noise: they are not searched (unless the library offers nothing else).
    std::vector<std::string> candidates;
    for (const auto& name : info.available)
      if (name.find("ref:") == std::string::npos || name == info.available.front()) candidates.push_back(name);
    if (candidates.empty()) candidates.push_back(info.chosen);
    double best = std::numeric_limits<double>::infinity(), first = 0;
    std::string best_impl;
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (c > 0 && std::chrono::duration<double>(Clock::now() - start_time).count() >= budget) break;
      if (opt.max_trials_per_kernel > 0 && static_cast<int>(c) >= opt.max_trials_per_kernel) break;
      step.impl = candidates[c];
      try {  // untimed: creates the primitive, so creation time is not measured as a launch
        jit::run_library_group(exe.graph(), step, values);
      } catch (const std::exception&) {
      }  // a failure shows again in measure(), which reports it
      const Measurement m =
          measure([&] { jit::run_library_group(exe.graph(), step, values); },
                  MeasureOptions{opt.measure.warmup, opt.measure.repeats, opt.measure.time_limit_seconds,
                                 opt.measure.min_sample_seconds, cuda});
      ++r.candidates;
      if (!m.ok) {
        ++r.failed;
        r.errors.push_back(candidates[c] + ": " + m.error);
        continue;
      }
      if (c == 0) first = m.median_seconds;  // the library's own choice: the baseline
      if (m.median_seconds < best) {
        best = m.median_seconds;
        best_impl = candidates[c];
      }
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - start_time).count();
    r.default_params = impl_json(candidates[0]);
    if (best_impl.empty() || first == 0) {
      r.status = "failed";
      return r;
    }
    r.status = "tuned";
    r.default_us = first * 1e6;
    r.best_us = best * 1e6;
    r.best_params = impl_json(best_impl);
    lib_winners[r.workload] = best_impl;
    fill_record(r);
    return r;
  };

  // Workloads that have records need no run. A record whose params do not parse or no kernel can
  // run with (sched::params_problem) is tuned again, as jit::compile ignores it.
  auto usable = [](const TuningRecord& rec) {
    try {
      return sched::params_problem(sched::params_from_json(rec.params_json)).empty();
    } catch (const std::exception&) {
      return false;
    }
  };
  for (const std::string& w : order) {
    const TuningRecord* rec = existing ? existing->best(w, target) : nullptr;
    if (rec && rec->scheduler == exe.kernels()[users[w][0]]->scheduled.scheduler && usable(*rec))
      finish(apply_record(users[w][0], *rec));
  }
  for (const std::string& w : lib_order) {
    const TuningRecord* rec = existing ? existing->best(w, target) : nullptr;
    if (!rec || rec->scheduler != steps[lib_users[w][0]].library) continue;
    KernelTuneResult r = lib_result(lib_users[w][0]);
    r.status = "record";
    r.best_params = rec->params_json;
    r.default_us = rec->default_us;
    r.best_us = rec->best_us;
    r.record = *rec;
    try {
      lib_winners[w] = Json::parse(rec->params_json).at("impl").as_string();
    } catch (const std::exception&) {
      continue;  // a malformed record: tune this one again
    }
    finish(r);
  }
  if (done < order.size() + lib_order.size()) {
    exe.run_with_hook(
        inputs,
        [&](size_t k, const std::vector<const jit::Tensor*>& values) {
          if (key[k].empty() || result_index.count(key[k])) return;
          finish(tune_one(k, values));
        },
        [&](size_t i, const std::vector<const jit::Tensor*>& values) {
          const std::string& w = steps[i].workload;
          if (!lib_users.count(w) || result_index.count(w)) return;
          finish(tune_library(i, values));
        });
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    auto it = lib_winners.find(steps[i].workload);
    if (it == lib_winners.end()) continue;
    exe.set_library_impl(i, it->second,
                         results[result_index.at(steps[i].workload)].status == "record" ? "record" : "tuned");
  }
  for (size_t k = 0; k < nk; ++k) {
    auto it = winners.find(key[k]);
    if (it == winners.end()) continue;
    const std::string origin = results[result_index.at(key[k])].status == "record" ? "record" : "tuned";
    const sched::ScheduledKernel sk = sched::scheduler_for(exe.instance(k), t).schedule(exe.instance(k), it->second, t);
    exe.replace_kernel(k, jit::get_kernel(sk, copt), sk.args, origin);
  }
  return results;
}

}  // namespace flow::autotune

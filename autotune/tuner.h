// Note: tuning the kernels of a compiled Executable in place, on its real inputs (and the
// implementation choice of its library calls: every implementation oneDNN offers for a call is
// timed on the call's real operands; records name it {"kind":"library","impl":...}). The Executable
// runs once with a hook before each kernel launch; at kernel k the tuner has every buffer k reads
// (the real intermediate values), so each candidate schedule of k is compiled (through the kernel
// cache, so re-tuning is cheap) and launched on those buffers and timed; a candidate whose outputs
// differ from the default schedule's is a failed trial, never a winner (autotune/verify.h). Kernels with the same
// workload key are tuned once; kernels whose workload already has a record for this target are
// skipped (that is how an interrupted sweep resumes). The budget is shared: each workload gets the
// remaining time divided by the workloads left. When the run ends every kernel is swapped for its
// winner, and the caller runs the Executable again for real outputs (candidates overwrite k's
// outputs while being timed).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autotune/measure.h"
#include "autotune/records.h"
#include "autotune/strategy.h"
#include "jit/compile.h"

namespace flow::autotune {

struct TuneOptions {
  double budget_seconds = 60;  // for the whole Executable
  int max_trials_per_kernel = 0;
  Strategy strategy = Strategy::Auto;
  uint64_t seed = 0;
  MeasureOptions measure;
};

struct KernelTuneResult {
  size_t kernel = 0;                              // first kernel index with this workload (library: the step index)
  int uses = 1;                                   // kernels of the Executable sharing the workload
  std::string name, workload, scheduler, domain;  // scheduler: "pointwise", "reduction" or the library
  std::string status;  // "tuned", "record" (a record existed: not measured), "failed" (baseline failed)
  std::string default_params, best_params;
  double default_us = 0, best_us = 0;
  int candidates = 0, failed = 0;
  double seconds = 0;
  std::string strategy;
  std::vector<std::string> errors;  // one line per failed candidate
  TuningRecord record;              // what was (or would be) appended
};

// Called after each workload (in kernel order): the result, workloads done so far, workloads in all.
using TuneProgress = std::function<void(const KernelTuneResult&, size_t done, size_t total)>;

// `existing` (may be null): records to honour instead of measuring. Each new record is passed to
// `progress` (via KernelTuneResult::record) before the next workload starts, so a caller can append
// it to a file at once.
std::vector<KernelTuneResult> tune_executable(jit::Executable& exe, const std::vector<jit::Tensor>& inputs,
                                              const TuneOptions& opt, const TuningDatabase* existing,
                                              const TuneProgress& progress);

}  // namespace flow::autotune

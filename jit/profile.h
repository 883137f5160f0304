// Note: a per-step profile of an Executable: how long each generated kernel and each library call
// takes inside a real run, on the run's own buffers. It is built on Executable::run_with_hook (the
// hooks fire before every step, so a step's time is the gap to the next hook; on a GPU each hook
// synchronizes first). A profile is for reading, never for tests: it is what `compiled.profile()`
// prints in Python.
#pragma once
#include <string>
#include <vector>

#include "jit/compile.h"

namespace flow::jit {

struct StepTime {
  std::string kind;    // "kernel" or "library"
  size_t index = 0;    // into kernels() or library_steps()
  int group = -1;      // fusion group
  std::string name;    // kernel function name, or the library step's describe()
  double seconds = 0;  // median over the repeats
};

// Runs `exe` on `inputs` `warmup` + `repeats` times and returns every step in run order with its
// median time. Steps skipped by a run (empty kernels) are absent.
std::vector<StepTime> profile_steps(const Executable& exe, const std::vector<Tensor>& inputs, int repeats = 10,
                                    int warmup = 2);

}  // namespace flow::jit

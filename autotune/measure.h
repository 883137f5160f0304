// Note: timing one candidate kernel. On the CPU the clock is std::chrono::steady_clock around
// synchronous launches; on a GPU, device events around launches on the current stream (so host
// launch overhead does not count). Both: warm-up launches first (the first launch also loads the
// binary), then samples of `launches_per_sample` back-to-back launches (enough to last
// min_sample_seconds, so microsecond kernels are above the clock's resolution); the result is the
// median sample divided by its launches. The time limit caps the whole measurement: a candidate
// slower than it is measured once and reported as such, so one terrible point cannot eat the budget.
#pragma once
#include <functional>
#include <string>

namespace flow::autotune {

struct MeasureOptions {
  int warmup = 1;
  int repeats = 7;
  double time_limit_seconds = 2.0;
  double min_sample_seconds = 2e-4;
  bool cuda = false;  // time with device events on the current stream
};

struct Measurement {
  bool ok = false;
  double median_seconds = 0;  // per launch
  double min_seconds = 0;     // per launch
  int samples = 0;
  int launches_per_sample = 1;
  bool hit_time_limit = false;
  std::string error;  // why it failed (ok == false)
};

// Never throws: an exception from `launch` is reported in Measurement::error.
Measurement measure(const std::function<void()>& launch, const MeasureOptions& opt);

}  // namespace flow::autotune

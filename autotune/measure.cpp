#include "autotune/measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <vector>

#include "runtime/cuda_stream.h"

namespace flow::autotune {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Seconds for `n` launches back to back.
double timed(const std::function<void()>& launch, int n, bool cuda) {
  if (cuda) {
    runtime::cuda::EventTimer timer;
    timer.start();
    for (int i = 0; i < n; ++i) launch();
    timer.stop();
    return timer.elapsed_ms() * 1e-3;
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) launch();
  return seconds_since(t0);
}

}  // namespace

Measurement measure(const std::function<void()>& launch, const MeasureOptions& opt) {
  Measurement m;
  try {
    const auto start = Clock::now();
    // Warm-up; its time sizes the samples.
    double first = 0;
    for (int i = 0; i < std::max(1, opt.warmup); ++i) first = timed(launch, 1, opt.cuda);
    if (seconds_since(start) >= opt.time_limit_seconds) {
      m.ok = true;
      m.hit_time_limit = true;
      m.samples = 1;
      m.median_seconds = m.min_seconds = first;
      return m;
    }
    m.launches_per_sample =
        first > 0 ? static_cast<int>(std::clamp(std::ceil(opt.min_sample_seconds / first), 1.0, 10000.0)) : 100;
    std::vector<double> samples;
    for (int r = 0; r < std::max(1, opt.repeats); ++r) {
      samples.push_back(timed(launch, m.launches_per_sample, opt.cuda) / m.launches_per_sample);
      if (seconds_since(start) >= opt.time_limit_seconds) {
        m.hit_time_limit = r + 1 < opt.repeats;
        break;
      }
    }
    std::sort(samples.begin(), samples.end());
    m.samples = static_cast<int>(samples.size());
    m.min_seconds = samples.front();
    const size_t n = samples.size();
    m.median_seconds = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    m.ok = true;
  } catch (const std::exception& e) {
    m.ok = false;
    m.error = e.what();
  }
  return m;
}

}  // namespace flow::autotune

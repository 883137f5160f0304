#include "jit/profile.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>

#include "runtime/cuda_stream.h"

namespace flow::jit {
namespace {

using Clock = std::chrono::steady_clock;

struct Mark {
  bool library = false;
  size_t index = 0;
  Clock::time_point at;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<StepTime> profile_steps(const Executable& exe, const std::vector<Tensor>& inputs, int repeats, int warmup) {
  if (repeats < 1) throw std::invalid_argument("profile: repeats must be at least 1");
  const bool gpu = exe.options().target == dsl::Target::CUDA;
  auto sync = [gpu] {
    if (gpu) runtime::cuda::synchronize();
  };
  std::vector<Mark> marks;
  auto on_kernel = [&](size_t k, const std::vector<const Tensor*>&) {
    sync();
    marks.push_back({false, k, Clock::now()});
  };
  auto on_library = [&](size_t s, const std::vector<const Tensor*>&) {
    sync();
    marks.push_back({true, s, Clock::now()});
  };
  // (library?, index) -> per-run seconds; `order` keeps the first run's step order.
  std::map<std::pair<bool, size_t>, std::vector<double>> times;
  std::vector<std::pair<bool, size_t>> order;
  for (int r = 0; r < warmup + repeats; ++r) {
    marks.clear();
    exe.run_with_hook(inputs, on_kernel, on_library, /*use_frozen_cache=*/true);
    sync();
    const auto end = Clock::now();
    if (r < warmup) continue;
    for (size_t i = 0; i < marks.size(); ++i) {
      const auto next = i + 1 < marks.size() ? marks[i + 1].at : end;
      const std::pair<bool, size_t> id{marks[i].library, marks[i].index};
      auto& t = times[id];
      if (t.empty() && r == warmup) order.push_back(id);
      t.push_back(std::chrono::duration<double>(next - marks[i].at).count());
    }
  }
  std::vector<StepTime> out;
  for (const auto& id : order) {
    StepTime st;
    st.kind = id.first ? "library" : "kernel";
    st.index = id.second;
    if (id.first) {
      const LibraryStep& step = exe.library_steps().at(id.second);
      st.group = step.group;
      st.name = step.describe();
    } else {
      st.name = exe.kernels().at(id.second)->scheduled.func.name;
      st.group = exe.kernel_group(id.second);
    }
    st.seconds = median(times[id]);
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace flow::jit

#include "autotune/search_space.h"

#include <algorithm>

#include "autotune/json.h"
#include "dsl/types.h"
#include "scheduler/column_reduction.h"

namespace flow::autotune {

size_t SearchSpace::size() const {
  size_t n = 1;
  for (const Knob& k : knobs) n *= k.values.size();
  return knobs.empty() ? 1 : n;
}

sched::Params SearchSpace::at(const std::vector<int>& idx) const {
  Json j = Json::parse(base_json);
  for (size_t i = 0; i < knobs.size() && i < idx.size(); ++i)
    j.set(knobs[i].name, Json(knobs[i].values.at(static_cast<size_t>(idx[i]))));
  return sched::params_from_json(j.dump());
}

std::vector<int> SearchSpace::unflatten(size_t i) const {
  std::vector<int> idx(knobs.size());
  for (size_t k = knobs.size(); k-- > 0;) {
    const size_t n = knobs[k].values.size();
    idx[k] = static_cast<int>(i % n);
    i /= n;
  }
  return idx;
}

SearchSpace search_space(const sched::KernelInstance& ki, const sched::Params& start, dsl::Target t) {
  SearchSpace s;
  s.base_json = sched::params_to_json(start);
  int widest = 1;
  for (const auto& b : ki.buffers) widest = std::max(widest, dsl::dtype_size(b.dtype));
  const bool cpu = t == dsl::Target::CPU;
  if (std::holds_alternative<sched::PointwiseParams>(start)) {
    if (cpu) {
      s.knobs = {
          {"cpu_tile", {4096, 16384, 32768, 131072}}, {"cpu_vector_width", {4, 8, 16, 32}}, {"cpu_unroll", {1, 2, 4}}};
    } else {
      s.knobs = {{"gpu_threads", {128, 256, 512, 1024}},
                 {"gpu_elements_per_thread", {1, 2, 4, 8, 16}},
                 {"gpu_vector_width", {1, 2, 4, 8}}};
      s.valid = [widest](const sched::Params& p) {
        const auto& q = std::get<sched::PointwiseParams>(p);
        return q.gpu_vector_width * widest <= 16 && q.gpu_elements_per_thread >= q.gpu_vector_width;
      };
    }
  } else {
    if (cpu) {
      s.knobs = {{"cpu_rows_per_task", {1, 4, 16, 64}}, {"cpu_vector_width", {4, 8, 16}}};
      // A few long rows split into chunks (sched::ReductionParams::cpu_row_splits), where it fits; rows
      // then run one after the other, so rows per task only matter unsplit.
      if (std::get<sched::ReductionParams>(start).cpu_row_splits > 1) {
        s.knobs.push_back({"cpu_row_splits", {1, 8, 64}});
        s.valid = [](const sched::Params& p) {
          const auto& q = std::get<sched::ReductionParams>(p);
          return q.cpu_row_splits == 1 || q.cpu_rows_per_task == 1;
        };
      }
    } else {
      s.knobs = {{"gpu_block_x", {32, 64, 128, 256, 512, 1024}}};
      // block_y > 1 is the column form (block_x adjacent rows per block), for the kernels it fits.
      // (Points past 1024 threads per block are skipped: sched::params_problem.)
      if (sched::column_reduction_fits(ki)) s.knobs.push_back({"gpu_block_y", {1, 4, 8, 16}});
    }
  }
  return s;
}

}  // namespace flow::autotune

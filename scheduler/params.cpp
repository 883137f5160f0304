#include "scheduler/params.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace flow::sched {

int64_t json_get_int(const std::string& json, const std::string& key, int64_t fallback) {
  const std::string needle = "\"" + key + "\":";
  const auto pos = json.find(needle);
  if (pos == std::string::npos) return fallback;
  const char* start = json.c_str() + pos + needle.size();
  char* end = nullptr;
  const long long v = std::strtoll(start, &end, 10);
  if (end == start) throw std::invalid_argument("Params JSON: value of '" + key + "' is not an integer: " + json);
  return v;
}

bool PointwiseParams::operator==(const PointwiseParams& o) const {
  return cpu_tile == o.cpu_tile && cpu_vector_width == o.cpu_vector_width && cpu_unroll == o.cpu_unroll &&
         gpu_threads == o.gpu_threads && gpu_elements_per_thread == o.gpu_elements_per_thread &&
         gpu_vector_width == o.gpu_vector_width;
}

std::string PointwiseParams::to_json() const {
  std::ostringstream os;
  os << "{\"kind\":\"pointwise\",\"cpu_tile\":" << cpu_tile << ",\"cpu_vector_width\":" << cpu_vector_width
     << ",\"cpu_unroll\":" << cpu_unroll << ",\"gpu_threads\":" << gpu_threads
     << ",\"gpu_elements_per_thread\":" << gpu_elements_per_thread << ",\"gpu_vector_width\":" << gpu_vector_width
     << "}";
  return os.str();
}

PointwiseParams PointwiseParams::from_json(const std::string& json) {
  PointwiseParams p;
  p.cpu_tile = json_get_int(json, "cpu_tile", p.cpu_tile);
  p.cpu_vector_width = static_cast<int>(json_get_int(json, "cpu_vector_width", p.cpu_vector_width));
  p.cpu_unroll = static_cast<int>(json_get_int(json, "cpu_unroll", p.cpu_unroll));
  p.gpu_threads = static_cast<int>(json_get_int(json, "gpu_threads", p.gpu_threads));
  p.gpu_elements_per_thread =
      static_cast<int>(json_get_int(json, "gpu_elements_per_thread", p.gpu_elements_per_thread));
  p.gpu_vector_width = static_cast<int>(json_get_int(json, "gpu_vector_width", p.gpu_vector_width));
  return p;
}

bool ReductionParams::operator==(const ReductionParams& o) const {
  return cpu_rows_per_task == o.cpu_rows_per_task && cpu_vector_width == o.cpu_vector_width &&
         cpu_row_splits == o.cpu_row_splits && gpu_block_x == o.gpu_block_x && gpu_block_y == o.gpu_block_y;
}

std::string ReductionParams::to_json() const {
  std::ostringstream os;
  os << "{\"kind\":\"reduction\",\"cpu_rows_per_task\":" << cpu_rows_per_task
     << ",\"cpu_vector_width\":" << cpu_vector_width << ",\"cpu_row_splits\":" << cpu_row_splits
     << ",\"gpu_block_x\":" << gpu_block_x << ",\"gpu_block_y\":" << gpu_block_y << "}";
  return os.str();
}

ReductionParams ReductionParams::from_json(const std::string& json) {
  ReductionParams p;
  p.cpu_rows_per_task = json_get_int(json, "cpu_rows_per_task", p.cpu_rows_per_task);
  p.cpu_vector_width = static_cast<int>(json_get_int(json, "cpu_vector_width", p.cpu_vector_width));
  p.cpu_row_splits = static_cast<int>(json_get_int(json, "cpu_row_splits", p.cpu_row_splits));
  p.gpu_block_x = static_cast<int>(json_get_int(json, "gpu_block_x", p.gpu_block_x));
  p.gpu_block_y = static_cast<int>(json_get_int(json, "gpu_block_y", p.gpu_block_y));
  return p;
}

std::string params_problem(const Params& params) {
  if (const auto* p = std::get_if<PointwiseParams>(&params)) {
    if (p->cpu_tile < 1 || p->cpu_vector_width < 1 || p->cpu_unroll < 1) return "CPU values must be positive";
    if (p->gpu_threads < 1 || p->gpu_threads > 1024) return "gpu_threads must be in [1, 1024]";
    if (p->gpu_elements_per_thread < 1 || p->gpu_vector_width < 1) return "GPU values must be positive";
    return "";
  }
  const auto& r = std::get<ReductionParams>(params);
  if (r.cpu_rows_per_task < 1 || r.cpu_vector_width < 1) return "CPU values must be positive";
  if (r.cpu_row_splits < 1 || r.cpu_row_splits > 1024) return "cpu_row_splits must be in [1, 1024]";
  if (r.gpu_block_x < 1 || r.gpu_block_y < 1 || int64_t{r.gpu_block_x} * r.gpu_block_y > 1024)
    return "gpu_block_x * gpu_block_y must be in [1, 1024]";
  return "";
}

std::string params_to_json(const Params& p) {
  return std::visit([](const auto& v) { return v.to_json(); }, p);
}

Params params_from_json(const std::string& json) {
  if (json.find("\"kind\":\"pointwise\"") != std::string::npos) return PointwiseParams::from_json(json);
  if (json.find("\"kind\":\"reduction\"") != std::string::npos) return ReductionParams::from_json(json);
  throw std::invalid_argument("Params JSON: unknown or missing kind: " + json);
}

const char* params_kind(const Params& p) {
  return std::holds_alternative<PointwiseParams>(p) ? "pointwise" : "reduction";
}

}  // namespace flow::sched

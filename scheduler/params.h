// Note: the scheduling parameters of each kernel class. A Params struct is plain data with
// equality, a canonical JSON form (which is part of the kernel cache key) and parsing back from
// JSON: it is the autotuner's search space. One struct per scheduler, each holding both the CPU
// and the GPU knobs; a scheduler reads the half that matches its target.
#pragma once
#include <cstdint>
#include <string>
#include <variant>

namespace flow::sched {

struct PointwiseParams {
  // CPU: elements per parallel task (tile of the innermost dim), SIMD lanes, vectors per step.
  int64_t cpu_tile = 32768;
  int cpu_vector_width = 8;
  int cpu_unroll = 1;
  // GPU: threads per block, elements per thread, lanes per vector access (16 bytes for float32).
  int gpu_threads = 256;
  int gpu_elements_per_thread = 4;
  int gpu_vector_width = 4;

  bool operator==(const PointwiseParams& o) const;
  std::string to_json() const;
  static PointwiseParams from_json(const std::string& json);
};

struct ReductionParams {
  // CPU: rows per parallel task, SIMD lanes of the partial accumulators.
  int64_t cpu_rows_per_task = 1;
  int cpu_vector_width = 8;
  // CPU, a few long rows of one reduced dim: each row's passes split into at most this many parallel
  // chunks, their partial results combined in order (1: rows are the only parallelism).
  int cpu_row_splits = 1;
  // GPU: one block per row, block_x threads cooperating on it; or, with block_y > 1 and rows that
  // are strided in memory while adjacent rows are contiguous, block_x adjacent rows per block, each
  // split over block_y threads (scheduler/column_reduction.h).
  int gpu_block_x = 256;
  int gpu_block_y = 1;

  bool operator==(const ReductionParams& o) const;
  std::string to_json() const;
  static ReductionParams from_json(const std::string& json);
};

using Params = std::variant<PointwiseParams, ReductionParams>;
std::string params_to_json(const Params& p);  // {"kind":"pointwise",...}
// The Params a params_to_json string describes (by its "kind"); throws std::invalid_argument for an
// unknown kind or a malformed value.
Params params_from_json(const std::string& json);
// "" when a kernel can run with `p`, else why not (a non-positive width, more than 1024 threads per
// block): tuning records are files users edit or bring from elsewhere, and the autotuner's grid
// holds such points.
std::string params_problem(const Params& p);
// "pointwise" or "reduction": the kind field of the JSON, which is also the scheduler's name.
const char* params_kind(const Params& p);

// Minimal JSON helpers for flat objects of numbers and strings (all Params need).
int64_t json_get_int(const std::string& json, const std::string& key, int64_t fallback);

}  // namespace flow::sched

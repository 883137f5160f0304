// Note: the tuning-record store (DESIGN.md §7; TVM MetaSchedule's database is the model). A record
// says: for this workload (sched::workload_key) on this target (jit::target_id), these Params ran
// in best_us against default_us for the heuristic ones. Records live in JSON-lines files, one
// record per line, only ever appended to, so a sweep that is interrupted keeps every kernel it
// finished and machines' files merge by concatenation (or by loading several). Loading a directory
// reads every *.jsonl in it. When several records share a (workload, target), the fastest wins.
//
// A line that does not parse or lacks a field is skipped and counted, never fatal: a record file
// is an optimization, like the kernel cache.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autotune/json.h"

namespace flow::autotune {

inline constexpr int kTuningRecordFormat = 1;

struct TuningRecord {
  std::string workload;  // sched::workload_key
  std::string target;    // jit::target_id
  std::string scheduler;
  std::string params_json;          // the winner (sched::params_to_json)
  std::string default_params_json;  // the heuristic choice it was measured against
  double best_us = 0;
  double default_us = 0;
  // For people reading the file.
  std::string kernel;  // kernel name
  std::string domain;  // "kept [..] reduced [..]"
  int candidates = 0;  // measured
  int failed = 0;      // failed to compile or run
  double tuning_seconds = 0;
  std::string strategy;
  std::string time;  // UTC, ISO 8601
  std::string host;

  Json to_json() const;
  static TuningRecord from_json(const Json& j);  // throws JsonError for a missing field
  double speedup() const { return best_us > 0 ? default_us / best_us : 0.0; }
};

struct LoadReport {
  int files = 0;
  int lines = 0;
  int bad_lines = 0;
};

class TuningDatabase {
 public:
  // Adds a record (keeps the faster of two for one workload and target).
  void add(const TuningRecord& r);
  void merge(const TuningDatabase& other);
  const TuningRecord* best(const std::string& workload, const std::string& target) const;
  size_t size() const { return best_.size(); }
  // The winning record of each (workload, target), ordered by key.
  std::vector<TuningRecord> records() const;

  // Loads a .jsonl file or every *.jsonl file in a directory (a missing path is an empty database).
  static TuningDatabase load(const std::string& path, LoadReport* report = nullptr);
  // Appends one line to `file` (parent directories are created) with one write() on an O_APPEND
  // descriptor, so processes appending at once do not interleave lines. Throws std::runtime_error
  // naming the file on failure.
  static void append(const std::string& file, const TuningRecord& r);
  // Writes all winning records to `file` (replacing it, atomically by rename).
  void save(const std::string& file) const;

 private:
  std::map<std::pair<std::string, std::string>, TuningRecord> best_;
};

// "records.jsonl" inside a tuning directory.
std::string records_file(const std::string& directory);
// Current UTC time as "2026-11-30T17:09:37Z"; the host name.
std::string utc_now();
std::string host_name();

}  // namespace flow::autotune

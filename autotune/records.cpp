#include "autotune/records.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace flow::autotune {

namespace fs = std::filesystem;

Json TuningRecord::to_json() const {
  Json::Object o;
  o.emplace_back("format", Json(kTuningRecordFormat));
  o.emplace_back("workload", Json(workload));
  o.emplace_back("target", Json(target));
  o.emplace_back("scheduler", Json(scheduler));
  o.emplace_back("params", Json::parse(params_json));
  o.emplace_back("best_us", Json(best_us));
  o.emplace_back("default_params", Json::parse(default_params_json));
  o.emplace_back("default_us", Json(default_us));
  o.emplace_back("kernel", Json(kernel));
  o.emplace_back("domain", Json(domain));
  o.emplace_back("candidates", Json(candidates));
  o.emplace_back("failed", Json(failed));
  o.emplace_back("tuning_seconds", Json(tuning_seconds));
  o.emplace_back("strategy", Json(strategy));
  o.emplace_back("time", Json(time));
  o.emplace_back("host", Json(host));
  return Json(std::move(o));
}

TuningRecord TuningRecord::from_json(const Json& j) {
  if (j.at("format").as_int() != kTuningRecordFormat)
    throw JsonError("tuning record format " + std::to_string(j.at("format").as_int()) + " is not " +
                    std::to_string(kTuningRecordFormat));
  TuningRecord r;
  r.workload = j.at("workload").as_string();
  r.target = j.at("target").as_string();
  r.scheduler = j.at("scheduler").as_string();
  r.params_json = j.at("params").dump();
  r.best_us = j.at("best_us").as_number();
  r.default_params_json = j.at("default_params").dump();
  r.default_us = j.at("default_us").as_number();
  auto str = [&](const char* k) { return j.find(k) && j.at(k).is_string() ? j.at(k).as_string() : std::string(); };
  auto num = [&](const char* k) { return j.find(k) && j.at(k).is_number() ? j.at(k).as_number() : 0.0; };
  r.kernel = str("kernel");
  r.domain = str("domain");
  r.candidates = static_cast<int>(num("candidates"));
  r.failed = static_cast<int>(num("failed"));
  r.tuning_seconds = num("tuning_seconds");
  r.strategy = str("strategy");
  r.time = str("time");
  r.host = str("host");
  if (!j.at("params").is_object() || r.workload.size() != 32)
    throw JsonError("tuning record: bad params or workload");
  return r;
}

void TuningDatabase::add(const TuningRecord& r) {
  const auto key = std::make_pair(r.workload, r.target);
  auto it = best_.find(key);
  if (it == best_.end()) {
    best_.emplace(key, r);
  } else if (r.best_us < it->second.best_us) {
    it->second = r;
  }
}

void TuningDatabase::merge(const TuningDatabase& other) {
  for (const auto& kv : other.best_) add(kv.second);
}

const TuningRecord* TuningDatabase::best(const std::string& workload, const std::string& target) const {
  auto it = best_.find(std::make_pair(workload, target));
  return it == best_.end() ? nullptr : &it->second;
}

std::vector<TuningRecord> TuningDatabase::records() const {
  std::vector<TuningRecord> out;
  out.reserve(best_.size());
  for (const auto& kv : best_) out.push_back(kv.second);
  return out;
}

namespace {

void load_file(const fs::path& file, TuningDatabase& db, LoadReport& rep) {
  std::ifstream in(file);
  if (!in) return;
  ++rep.files;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++rep.lines;
    try {
      db.add(TuningRecord::from_json(Json::parse(line)));
    } catch (const std::exception&) {
      ++rep.bad_lines;  // a torn or foreign line: skipped
    }
  }
}

}  // namespace

TuningDatabase TuningDatabase::load(const std::string& path, LoadReport* report) {
  TuningDatabase db;
  LoadReport rep;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".jsonl") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) load_file(f, db, rep);
  } else if (fs::exists(path, ec)) {
    load_file(path, db, rep);
  }
  if (report) *report = rep;
  return db;
}

void TuningDatabase::append(const std::string& file, const TuningRecord& r) {
  const std::string line = r.to_json().dump() + "\n";
  const fs::path p(file);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open tuning records " + file + ": " + std::strerror(errno));
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("cannot append to tuning records " + file + ": " + std::strerror(err));
}

void TuningDatabase::save(const std::string& file) const {
  const fs::path p(file);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::random_device rd;
  const std::string tmp = file + "." + std::to_string(::getpid()) + "." + std::to_string(rd()) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write tuning records " + tmp);
    for (const auto& kv : best_) out << kv.second.to_json().dump() << "\n";
    if (!out) throw std::runtime_error("cannot write tuning records " + tmp);
  }
  fs::rename(tmp, file, ec);
  if (ec) throw std::runtime_error("cannot rename " + tmp + " to " + file + ": " + ec.message());
}

std::string records_file(const std::string& directory) {
  return (fs::path(directory) / "records.jsonl").string();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace flow::autotune

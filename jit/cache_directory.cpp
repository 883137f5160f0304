#include "jit/cache_directory.h"

#include <sys/stat.h>
#include <fcntl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "dsl/serialize.h"
#include "jit/kernel_cache.h"

namespace flow::jit {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kStaleTempSeconds = 3600;

bool is_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

int64_t mtime_seconds(const std::string& path, bool* ok) {
  struct stat st {};
  *ok = ::stat(path.c_str(), &st) == 0;
  return *ok ? static_cast<int64_t>(st.st_mtim.tv_sec) : 0;
}

// Temporary files of stores older than an hour (a crashed writer's leftovers).
std::vector<std::string> stale_temp_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 4 && name[0] == '.' && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      bool ok = false;
      const int64_t m = mtime_seconds(it->path().string(), &ok);
      if (ok && now - m > kStaleTempSeconds) out.push_back(it->path().string());
    }
  }
  return out;
}

PruneResult remove_until(const std::string& dir, uint64_t max_bytes, const std::string& keep) {
  PruneResult r;
  std::vector<CacheFile> files = list_cache_files(dir);
  uint64_t total = 0;
  for (const auto& f : files) total += f.bytes;
  size_t i = 0;
  const std::string keep_norm = keep.empty() ? std::string() : fs::path(keep).lexically_normal().string();
  for (; i < files.size() && total > max_bytes; ++i) {
    if (!keep_norm.empty() && fs::path(files[i].path).lexically_normal().string() == keep_norm) continue;
    std::error_code ec;
    if (fs::remove(files[i].path, ec)) {
      ++r.removed_files;
      r.removed_bytes += files[i].bytes;
    }
    total -= files[i].bytes;  // removed by us or by someone else: gone either way
  }
  r.remaining_files = static_cast<int>(files.size()) - r.removed_files;
  r.remaining_bytes = total;
  for (const auto& t : stale_temp_files(dir)) {
    std::error_code ec;
    fs::remove(t, ec);
  }
  return r;
}

}  // namespace

std::vector<CacheFile> list_cache_files(const std::string& dir) {
  std::vector<CacheFile> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (auto sub = fs::directory_iterator(dir, ec); !ec && sub != fs::directory_iterator(); sub.increment(ec)) {
    const std::string prefix = sub->path().filename().string();
    if (prefix.size() != 2 || !is_hex(prefix) || !sub->is_directory(ec)) continue;
    std::error_code ec2;
    for (auto f = fs::directory_iterator(sub->path(), ec2); !ec2 && f != fs::directory_iterator(); f.increment(ec2)) {
      const std::string name = f->path().filename().string();
      if (name.size() != 35 || name.compare(32, 3, ".fk") != 0 || !is_hex(name.substr(0, 32))) continue;
      struct stat st {};
      if (::stat(f->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // vanished or odd
      out.push_back(CacheFile{f->path().string(), name.substr(0, 32), static_cast<uint64_t>(st.st_size),
                              static_cast<int64_t>(st.st_mtim.tv_sec),
                              static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
    }
  }
  std::sort(out.begin(), out.end(), [](const CacheFile& a, const CacheFile& b) {
    return a.last_used_ns != b.last_used_ns ? a.last_used_ns < b.last_used_ns : a.path < b.path;
  });
  return out;
}

CacheDirectorySummary summarize_cache_directory(const std::string& dir) {
  CacheDirectorySummary s;
  for (const auto& f : list_cache_files(dir)) {
    ++s.files;
    s.bytes += f.bytes;
  }
  return s;
}

PruneResult prune_cache_directory(const std::string& dir, uint64_t max_bytes, const std::string& keep) {
  return remove_until(dir, max_bytes, keep);
}

PruneResult clear_cache_directory(const std::string& dir) {
  return remove_until(dir, 0, "");
}

void touch_cache_file(const std::string& path) {
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
}

CacheEntryInfo describe_cache_file(const std::string& path) {
  CacheEntryInfo info;
  try {
    const std::string name = fs::path(path).filename().string();
    if (name.size() != 35 || !is_hex(name.substr(0, 32))) {
      info.why = "not an entry file name";
      return info;
    }
    Hash128 key;
    key.hi = std::stoull(name.substr(0, 16), nullptr, 16);
    key.lo = std::stoull(name.substr(16, 16), nullptr, 16);
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::optional<CacheEntry> e = decode_cache_entry(key, bytes, &info.why);
    if (!e) return info;
    info.params_json = e->params_json;
    info.compile_seconds = e->compile_seconds;
    info.binary_bytes = e->binary.size();
    info.kernel = dsl::deserialize_func(e->canonical_source).name;
    info.ok = true;
  } catch (const std::exception& ex) {
    info.ok = false;
    info.why = ex.what();
  }
  return info;
}

uint64_t parse_byte_size(const std::string& text) {
  size_t i = 0;
  double value = 0;
  try {
    value = std::stod(text, &i);
  } catch (const std::exception&) {
    throw std::invalid_argument("not a size: '" + text + "' (expected e.g. 1024, 500M, 2G)");
  }
  std::string unit = text.substr(i);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
  else throw std::invalid_argument("not a size: '" + text + "' (unknown unit '" + unit + "')");
  if (!(value >= 0) || !std::isfinite(value)) throw std::invalid_argument("not a size: '" + text + "'");
  return static_cast<uint64_t>(std::llround(value * scale));
}

}  // namespace flow::jit

// Note: maintenance of a kernel-cache directory (what `python -m flow.cache` and the size cap use):
// listing entries, least-recently-used pruning and clearing. Every operation tolerates other
// processes storing, renaming and evicting in the same directory at once: a file that vanishes
// between listing and removal is skipped, and temporary files (".<hex>.<pid>.<random>.tmp") are
// removed only when older than an hour, since a young one is another process's store in progress.
// Recency is the file's mtime: KernelCache sets it on every hit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace flow::jit {

struct CacheFile {
  std::string path;
  std::string key_hex;  // from the file name
  uint64_t bytes = 0;
  int64_t last_used = 0;     // mtime, seconds since the epoch
  int64_t last_used_ns = 0;  // the same in nanoseconds (the sort key)
};

struct CacheDirectorySummary {
  int files = 0;
  uint64_t bytes = 0;
};

struct PruneResult {
  int removed_files = 0;
  uint64_t removed_bytes = 0;
  int remaining_files = 0;
  uint64_t remaining_bytes = 0;
};

// Entry files (<dir>/<2 hex>/<32 hex>.fk), least recently used first.
std::vector<CacheFile> list_cache_files(const std::string& dir);
CacheDirectorySummary summarize_cache_directory(const std::string& dir);
// Removes least recently used entries until the directory holds at most max_bytes of entries;
// `keep` (a path, optional) is never removed (the entry a store just wrote).
PruneResult prune_cache_directory(const std::string& dir, uint64_t max_bytes, const std::string& keep = "");
// Removes every entry (and stale temporary files).
PruneResult clear_cache_directory(const std::string& dir);
// Sets a file's mtime to now (a cache hit); errors are ignored.
void touch_cache_file(const std::string& path);

// What one entry file holds, for listings: never throws; ok=false with `why` for a bad file.
struct CacheEntryInfo {
  bool ok = false;
  std::string why;
  std::string kernel;  // the loop nest's name
  std::string params_json;
  double compile_seconds = 0;
  uint64_t binary_bytes = 0;
};
CacheEntryInfo describe_cache_file(const std::string& path);

// "1024", "500K", "500M", "2G", "1.5GiB", "10MB" -> bytes (K/M/G/T are powers of 1024). Throws
// std::invalid_argument with the text for anything else.
uint64_t parse_byte_size(const std::string& text);

}  // namespace flow::jit

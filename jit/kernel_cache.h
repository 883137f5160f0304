// Note: the kernel cache (DESIGN.md §5): memory map -> disk directory -> miss (the caller compiles
// and stores). Keys are XXH3-128 over a length-prefixed, pointer-free encoding of everything that
// determines the binary; never std::hash.
//
// On disk each entry is one file, <dir>/<first 2 hex digits>/<32 hex digits>.fk, all integers
// little-endian:
//   header   (60 bytes)  magic "FLOWKC01" | u32 format version | key (u64 lo, u64 hi) |
//                        u64 source length | u64 params length | u64 binary length |
//                        u64 XXH3-64 of the payload
//   payload              canonical source | params JSON | f64 compile seconds (IEEE bits) | binary
// A store writes a uniquely named temporary file (.<hex>.<pid>.<random>.tmp) in the same
// directory and rename()s it into place, so a reader sees either no file, an old complete file or
// the new complete file, never a mix; concurrent writers of one key simply race to the last rename.
// No fsync: a crash can leave a short or empty file, which the checks below reject.
//
// A disk entry is used only if the magic, version, key, lengths (summing to the file size) and
// checksum all match and its stored canonical source equals the caller's (which also makes a
// 128-bit collision harmless). Anything else is counted in corrupt_entries, reported as a miss and
// replaced by the next store; nothing a file contains can make lookup throw or crash. Failures to
// write are logged and swallowed: the cache is an optimization, never a reason to fail a compile.
// Bad files are not deleted on lookup: another process may be renaming a good one into place.
//
// Layers: read-only directories (a shipped bundle's kernels, flow.load) are looked up after memory
// and before the cache's own directory; nothing is ever written, touched or evicted there. A hit in
// the own directory sets the file's mtime to now, which is what least-recently-used eviction sorts
// by (atime is unreliable: noatime mounts). With a size cap (FLOW_CACHE_MAX_SIZE, e.g. "2G"), a
// store that brings the directory over the cap evicts the least recently used entries down to 90%
// of it (jit/cache_directory.h; when to look is in enforce_cap); eviction is an unlink, so a process reading a file keeps its copy
// and one about to open it sees a miss and recompiles.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dsl/serialize.h"

namespace flow::jit {

using dsl::Hash128;

// Bump when the key encoding or the meaning of any key field changes (the old entries then miss).
inline constexpr const char* kKernelCacheKeySalt = "flow.kernel_cache.key/1";
// Bump when the entry file layout changes (old files are then rejected as foreign).
inline constexpr uint32_t kKernelCacheFileVersion = 1;
inline constexpr char kKernelCacheMagic[8] = {'F', 'L', 'O', 'W', 'K', 'C', '0', '1'};
inline constexpr size_t kKernelCacheHeaderSize = 60;

// XXH3-128 over the salt and the six fields, each prefixed by its length (u64 little-endian).
Hash128 kernel_cache_key(const std::string& canonical_source, const std::string& params_json,
                         const std::string& backend, const std::string& target, const std::string& compiler_id,
                         const std::string& flags);

struct CacheEntry {
  std::string canonical_source;
  std::string params_json;
  double compile_seconds = 0.0;
  std::string binary;
};

struct KernelCacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;
  uint64_t stores = 0;
  uint64_t corrupt_entries = 0;  // bad or mismatched disk files met by lookup (each also a miss)
  uint64_t readonly_hits = 0;    // disk hits served by a read-only layer (also counted in disk_hits)
  uint64_t evicted = 0;          // entries this process evicted for the size cap
  double compile_seconds = 0.0;  // summed by record_compile()
};

class KernelCache {
 public:
  // directory "" means memory only. The directory is created on the first store.
  explicit KernelCache(std::string directory = "");

  const std::string& directory() const { return directory_; }
  // The file an entry for `key` lives in; "" for a memory-only cache.
  std::string entry_path(const Hash128& key) const;

  // The entry for `key` if one is cached with exactly this canonical source. Never throws for bad
  // cache contents.
  std::optional<CacheEntry> lookup(const Hash128& key, const std::string& canonical_source);
  // Puts the entry in memory and (if there is a directory) on disk. Never throws for I/O errors.
  void store(const Hash128& key, const CacheEntry& entry);

  void record_compile(double seconds);
  KernelCacheStats stats() const;
  void reset_stats();
  // Forgets the memory level (the disk is untouched).
  void clear_memory();

  // Read-only layers, looked up newest first; adding one twice is a no-op.
  void add_readonly_directory(const std::string& dir);
  void remove_readonly_directory(const std::string& dir);
  std::vector<std::string> readonly_directories() const;
  // Writes the entry for `key` (from memory, else from a layer's file) into another cache directory
  // `dir` (a bundle's kernels); false when this cache does not have it.
  bool export_entry(const Hash128& key, const std::string& dir);
  // Size cap of the own directory in bytes (0: none).
  void set_max_bytes(uint64_t max_bytes);
  uint64_t max_bytes() const;

 private:
  struct KeyHasher {
    size_t operator()(const Hash128& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ULL)); }
  };

  void enforce_cap(uint64_t stored_bytes, const std::string& stored_path);

  const std::string directory_;
  mutable std::mutex mutex_;
  std::vector<std::string> readonly_dirs_;
  uint64_t max_bytes_ = 0;
  uint64_t estimated_bytes_ = 0;  // own directory size at the last scan plus what was stored since
  uint64_t stored_since_scan_ = 0;
  bool scanned_ = false;
  std::unordered_map<Hash128, CacheEntry, KeyHasher> memory_;
  KernelCacheStats stats_;
};

// The process-wide cache. Directory: $FLOW_CACHE_DIR if set (set but empty: memory only), else
// $XDG_CACHE_HOME/flow/kernels, else ~/.cache/flow/kernels. FLOW_DISABLE_DISK_CACHE=1: memory only.
// FLOW_CACHE_MAX_SIZE: the size cap ("500M", "2G", bytes). FLOW_CACHE_READONLY: read-only layers
// (':'-separated directories).
KernelCache& global_kernel_cache();

// The file format, exposed for tests and tools. decode returns nullopt (and why) for anything that
// is not a well-formed entry for `key`; it does not compare the canonical source.
std::string encode_cache_entry(const Hash128& key, const CacheEntry& entry);
std::optional<CacheEntry> decode_cache_entry(const Hash128& key, const std::string& bytes, std::string* why = nullptr);
// 32 lowercase hex digits, hi then lo (the on-disk file name).
std::string cache_key_hex(const Hash128& key);
// The inverse (nullopt unless exactly 32 hex digits).
std::optional<Hash128> parse_cache_key_hex(const std::string& hex);

}  // namespace flow::jit

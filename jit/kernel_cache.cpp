#include "jit/kernel_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "jit/cache_directory.h"
#include "jit/log.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace flow::jit {
namespace {

constexpr const char* kTopic = "cache";

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
void put_field(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

uint64_t payload_checksum(const char* data, size_t size) {
  return XXH3_64bits(data, size);
}

// Header fields after validation.
struct Layout {
  uint64_t source_len = 0, params_len = 0, binary_len = 0, checksum = 0;
};

constexpr size_t kOffVersion = 8, kOffKey = 12, kOffLens = 28, kOffChecksum = 52;
static_assert(kOffChecksum + 8 == kKernelCacheHeaderSize, "header layout");

// Checks a header against the key and the total size of the file it came from.
bool check_header(const Hash128& key, const char* h, uint64_t file_size, Layout& out, std::string& why) {
  if (std::memcmp(h, kKernelCacheMagic, sizeof(kKernelCacheMagic)) != 0) {
    why = "bad magic (not a flow kernel-cache entry)";
    return false;
  }
  if (const uint32_t v = get_u32(h + kOffVersion); v != kKernelCacheFileVersion) {
    why = "file format version " + std::to_string(v) + " (expected " + std::to_string(kKernelCacheFileVersion) + ")";
    return false;
  }
  if (get_u64(h + kOffKey) != key.lo || get_u64(h + kOffKey + 8) != key.hi) {
    why = "entry belongs to another key";
    return false;
  }
  out.source_len = get_u64(h + kOffLens);
  out.params_len = get_u64(h + kOffLens + 8);
  out.binary_len = get_u64(h + kOffLens + 16);
  out.checksum = get_u64(h + kOffChecksum);
  const uint64_t payload = file_size - kKernelCacheHeaderSize;  // file_size >= header checked by callers
  // Each length is bounded by the payload before summing, so the sum cannot overflow.
  if (out.source_len > payload || out.params_len > payload || out.binary_len > payload ||
      out.source_len + out.params_len + out.binary_len + sizeof(double) != payload) {
    why = "lengths do not match the file size (" + std::to_string(file_size) + " bytes): truncated or corrupt";
    return false;
  }
  return true;
}

std::optional<CacheEntry> decode_payload(const Layout& l, const char* p, size_t size, std::string& why) {
  if (payload_checksum(p, size) != l.checksum) {
    why = "checksum mismatch: corrupt";
    return std::nullopt;
  }
  CacheEntry e;
  e.canonical_source.assign(p, l.source_len);
  p += l.source_len;
  e.params_json.assign(p, l.params_len);
  p += l.params_len;
  const uint64_t bits = get_u64(p);
  static_assert(sizeof(double) == sizeof(uint64_t), "IEEE double");
  std::memcpy(&e.compile_seconds, &bits, sizeof(bits));
  p += sizeof(double);
  e.binary.assign(p, l.binary_len);
  return e;
}

// Reads exactly `size` bytes at `offset`; false on error or end of file.
bool read_exact(int fd, char* buf, size_t size, off_t offset) {
  while (size > 0) {
    const ssize_t r = ::pread(fd, buf, size, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    size -= static_cast<size_t>(r);
    offset += r;
  }
  return true;
}

bool write_all(int fd, const char* buf, size_t size) {
  while (size > 0) {
    const ssize_t r = ::write(fd, buf, size);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    size -= static_cast<size_t>(r);
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting the error (a write error may surface only at close).
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

enum class ReadStatus { kMissing, kOk, kBad };

ReadStatus read_entry_file(const std::string& path, const Hash128& key, CacheEntry& out, std::string& why) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return ReadStatus::kMissing;
    why = std::string("cannot open: ") + std::strerror(errno);
    return ReadStatus::kBad;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
    return ReadStatus::kBad;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kKernelCacheHeaderSize) {
    why = "truncated (" + std::to_string(size) + " bytes, shorter than the header)";
    return ReadStatus::kBad;
  }
  char header[kKernelCacheHeaderSize];
  Layout layout;
  if (!read_exact(fd.get(), header, sizeof(header), 0)) {
    why = "read error in the header";
    return ReadStatus::kBad;
  }
  if (!check_header(key, header, size, layout, why)) return ReadStatus::kBad;
  std::string payload(size - kKernelCacheHeaderSize, '\0');
  if (!read_exact(fd.get(), payload.data(), payload.size(), static_cast<off_t>(kKernelCacheHeaderSize))) {
    why = "read error or file shrank while reading";
    return ReadStatus::kBad;
  }
  std::optional<CacheEntry> e = decode_payload(layout, payload.data(), payload.size(), why);
  if (!e) return ReadStatus::kBad;
  out = std::move(*e);
  return ReadStatus::kOk;
}

// A name no other writer (thread or process) uses: pid + per-process random + counter.
std::string unique_suffix() {
  static const uint64_t process_random = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
  // After fork() the child shares process_random and counter with the parent, but not the pid.
  return std::to_string(::getpid()) + "." + std::to_string(process_random) + "." + std::to_string(n);
}

// Writes `bytes` to `path` atomically (temporary + rename). False with `why` on failure.
bool write_atomically(const std::string& path, const std::string& bytes, std::string& why) {
  namespace fs = std::filesystem;
  const fs::path final_path(path);
  const fs::path dir = final_path.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    why = "cannot create " + dir.string() + ": " + ec.message();
    return false;
  }
  const std::string tmp = (dir / ("." + final_path.stem().string() + "." + unique_suffix() + ".tmp")).string();
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    why = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  bool ok = write_all(fd.get(), bytes.data(), bytes.size());
  if (!ok) why = "write to " + tmp + " failed: " + std::strerror(errno);
  if (!fd.close() && ok) {
    ok = false;
    why = "close of " + tmp + " failed: " + std::strerror(errno);
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    why = "rename to " + path + " failed: " + std::strerror(errno);
  }
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}

void log_decision(const std::string& msg) {
  if (log_enabled(kTopic)) log_line(kTopic, msg);
}

std::string default_cache_directory() {
  if (const char* d = std::getenv("FLOW_DISABLE_DISK_CACHE"); d != nullptr && std::strcmp(d, "1") == 0) return {};
  if (const char* d = std::getenv("FLOW_CACHE_DIR")) return d;  // "" means memory only
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x == '/') {
    return std::string(x) + "/flow/kernels";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr) home = pw->pw_dir;
  }
  if (home == nullptr || *home == '\0') return {};
  return std::string(home) + "/.cache/flow/kernels";
}

}  // namespace

std::string cache_key_hex(const Hash128& key) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[static_cast<size_t>(i)] = kDigits[(key.hi >> (60 - 4 * i)) & 0xF];
    s[static_cast<size_t>(16 + i)] = kDigits[(key.lo >> (60 - 4 * i)) & 0xF];
  }
  return s;
}

Hash128 kernel_cache_key(const std::string& canonical_source, const std::string& params_json,
                         const std::string& backend, const std::string& target, const std::string& compiler_id,
                         const std::string& flags) {
  const std::string salt = kKernelCacheKeySalt;
  std::string buf;
  buf.reserve(7 * 8 + salt.size() + canonical_source.size() + params_json.size() + backend.size() + target.size() +
              compiler_id.size() + flags.size());
  put_field(buf, salt);
  put_field(buf, canonical_source);
  put_field(buf, params_json);
  put_field(buf, backend);
  put_field(buf, target);
  put_field(buf, compiler_id);
  put_field(buf, flags);
  return dsl::xxh3_128(buf);
}

std::string encode_cache_entry(const Hash128& key, const CacheEntry& e) {
  std::string payload;
  payload.reserve(e.canonical_source.size() + e.params_json.size() + sizeof(double) + e.binary.size());
  payload += e.canonical_source;
  payload += e.params_json;
  uint64_t bits = 0;
  std::memcpy(&bits, &e.compile_seconds, sizeof(bits));
  put_u64(payload, bits);
  payload += e.binary;

  std::string out;
  out.reserve(kKernelCacheHeaderSize + payload.size());
  out.append(kKernelCacheMagic, sizeof(kKernelCacheMagic));
  put_u32(out, kKernelCacheFileVersion);
  put_u64(out, key.lo);
  put_u64(out, key.hi);
  put_u64(out, e.canonical_source.size());
  put_u64(out, e.params_json.size());
  put_u64(out, e.binary.size());
  put_u64(out, payload_checksum(payload.data(), payload.size()));
  out += payload;
  return out;
}

std::optional<CacheEntry> decode_cache_entry(const Hash128& key, const std::string& bytes, std::string* why) {
  std::string reason;
  std::optional<CacheEntry> e;
  Layout layout;
  if (bytes.size() < kKernelCacheHeaderSize) {
    reason = "truncated (" + std::to_string(bytes.size()) + " bytes, shorter than the header)";
  } else if (check_header(key, bytes.data(), bytes.size(), layout, reason)) {
    e = decode_payload(layout, bytes.data() + kKernelCacheHeaderSize, bytes.size() - kKernelCacheHeaderSize, reason);
  }
  if (why != nullptr) *why = reason;
  return e;
}

KernelCache::KernelCache(std::string directory) : directory_(std::move(directory)) {}

std::string KernelCache::entry_path(const Hash128& key) const {
  if (directory_.empty()) return {};
  const std::string hex = cache_key_hex(key);
  return directory_ + "/" + hex.substr(0, 2) + "/" + hex + ".fk";
}

std::optional<CacheEntry> KernelCache::lookup(const Hash128& key, const std::string& canonical_source) {
  const std::string hex = cache_key_hex(key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = memory_.find(key); it != memory_.end()) {
      if (it->second.canonical_source == canonical_source) {
        ++stats_.memory_hits;
        log_decision("memory hit " + hex);
        return it->second;
      }
      // Same key, different source: a 128-bit collision or a caller bug. Do not trust disk either.
      ++stats_.misses;
      log_decision("miss " + hex + " (memory entry has a different canonical source)");
      return std::nullopt;
    }
  }
  std::vector<std::string> layers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    layers.assign(readonly_dirs_.rbegin(), readonly_dirs_.rend());
  }
  const bool own = !directory_.empty();
  if (own) layers.push_back(directory_);
  const std::string name = hex.substr(0, 2) + "/" + hex + ".fk";
  bool any_missing = false;
  // Disk I/O happens outside the lock.
  for (size_t layer = 0; layer < layers.size(); ++layer) {
    const bool readonly = !(own && layer + 1 == layers.size());
    const std::string path = layers[layer] + "/" + name;
    CacheEntry entry;
    std::string why;
    ReadStatus status = ReadStatus::kBad;
    try {
      status = read_entry_file(path, key, entry, why);
      if (status == ReadStatus::kOk && entry.canonical_source != canonical_source) {
        status = ReadStatus::kBad;
        why = "stored canonical source differs from the requested one";
      }
    } catch (const std::exception& e) {  // e.g. bad_alloc for an absurd but self-consistent size
      status = ReadStatus::kBad;
      why = std::string("error reading: ") + e.what();
    }
    if (status == ReadStatus::kOk) {
      if (!readonly) touch_cache_file(path);  // least-recently-used order
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.disk_hits;
      if (readonly) ++stats_.readonly_hits;
      log_decision(std::string(readonly ? "read-only hit " : "disk hit ") + hex + " (" + path + ")");
      memory_[key] = entry;
      return entry;
    }
    if (status == ReadStatus::kBad) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.corrupt_entries;
      log_decision("corrupt " + hex + ": " + why + " (" + path + "); ignored" +
                   (readonly ? "" : ", the next store replaces it"));
    } else {
      any_missing = true;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.misses;
  if (any_missing || layers.empty()) log_decision("miss " + hex);
  return std::nullopt;
}

void KernelCache::store(const Hash128& key, const CacheEntry& entry) {
  const std::string hex = cache_key_hex(key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_[key] = entry;
    ++stats_.stores;
  }
  if (directory_.empty()) {
    log_decision("store " + hex + " (memory)");
    return;
  }
  const std::string path = entry_path(key);
  std::string why;
  bool ok = false;
  try {
    ok = write_atomically(path, encode_cache_entry(key, entry), why);
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (ok) {
    log_decision("store " + hex + " -> " + path + " (" + std::to_string(entry.binary.size()) + " byte binary)");
    enforce_cap(kKernelCacheHeaderSize + entry.canonical_source.size() + entry.params_json.size() + 8 +
                    entry.binary.size(),
                path);
    return;
  }
  // Warn once per process even without FLOW_LOG=cache: a silently useless disk cache costs minutes.
  static std::atomic<bool> warned{false};
  if (log_enabled(kTopic) || !warned.exchange(true)) {
    log_line(kTopic, "warning: could not write " + path + ": " + why +
                         " (the entry stays in memory; further write errors are shown with FLOW_LOG=cache)");
  }
}

void KernelCache::record_compile(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.compile_seconds += seconds;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void KernelCache::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = KernelCacheStats{};
}

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.clear();
}

bool KernelCache::export_entry(const Hash128& key, const std::string& dir) {
  std::string bytes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = memory_.find(key); it != memory_.end()) bytes = encode_cache_entry(key, it->second);
  }
  const std::string name = cache_key_hex(key).substr(0, 2) + "/" + cache_key_hex(key) + ".fk";
  if (bytes.empty()) {
    std::vector<std::string> layers = readonly_directories();
    if (!directory_.empty()) layers.push_back(directory_);
    for (const auto& layer : layers) {
      CacheEntry e;
      std::string why;
      try {
        if (read_entry_file(layer + "/" + name, key, e, why) == ReadStatus::kOk) {
          bytes = encode_cache_entry(key, e);
          break;
        }
      } catch (const std::exception&) {  // an absurd but self-consistent size: not exportable
      }
    }
  }
  if (bytes.empty()) return false;
  std::string why;
  if (!write_atomically(dir + "/" + name, bytes, why)) throw std::runtime_error("cannot write " + dir + "/" + name + ": " + why);
  return true;
}

std::optional<Hash128> parse_cache_key_hex(const std::string& hex) {
  if (hex.size() != 32) return std::nullopt;
  for (char c : hex)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  Hash128 k;
  k.hi = std::stoull(hex.substr(0, 16), nullptr, 16);
  k.lo = std::stoull(hex.substr(16, 16), nullptr, 16);
  return k;
}

void KernelCache::add_readonly_directory(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& d : readonly_dirs_)
    if (d == dir) return;
  readonly_dirs_.push_back(dir);
  log_decision("read-only layer added: " + dir);
}

void KernelCache::remove_readonly_directory(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  readonly_dirs_.erase(std::remove(readonly_dirs_.begin(), readonly_dirs_.end(), dir), readonly_dirs_.end());
}

std::vector<std::string> KernelCache::readonly_directories() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return readonly_dirs_;
}

void KernelCache::set_max_bytes(uint64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_bytes_ = max_bytes;
  scanned_ = false;
}

uint64_t KernelCache::max_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_bytes_;
}

// Scans the directory when the estimate says the cap may be exceeded, or when this process has
// stored a tenth of the cap since its last scan (other processes store too, unseen by the
// estimate), so a store costs one directory walk per ~10% of the cap written, not one per store.
// Several processes can thus overshoot the cap by about a tenth of it each before one prunes.
void KernelCache::enforce_cap(uint64_t stored_bytes, const std::string& stored_path) {
  uint64_t cap = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cap = max_bytes_;
    estimated_bytes_ += stored_bytes;
    stored_since_scan_ += stored_bytes;
    if (cap == 0 || (scanned_ && estimated_bytes_ <= cap && stored_since_scan_ < cap / 10)) return;
    scanned_ = true;
    stored_since_scan_ = 0;
  }
  const CacheDirectorySummary before = summarize_cache_directory(directory_);
  uint64_t now = before.bytes;
  uint64_t evicted = 0;
  if (before.bytes > cap) {
    const PruneResult r = prune_cache_directory(directory_, cap / 10 * 9, stored_path);
    now = r.remaining_bytes;
    evicted = static_cast<uint64_t>(r.removed_files);
    log_decision("size cap " + std::to_string(cap) + " bytes: evicted " + std::to_string(r.removed_files) +
                 " least recently used entries (" + std::to_string(r.removed_bytes) + " bytes)");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  estimated_bytes_ = now;
  stats_.evicted += evicted;
}

KernelCache& global_kernel_cache() {
  static KernelCache cache = [] {
    std::string dir = default_cache_directory();
    log_decision("global cache directory: " + (dir.empty() ? std::string("(memory only)") : dir));
    return KernelCache(std::move(dir));
  }();
  static const bool configured = [] {
    if (const char* cap = std::getenv("FLOW_CACHE_MAX_SIZE"); cap != nullptr && *cap != '\0') {
      try {
        cache.set_max_bytes(parse_byte_size(cap));
      } catch (const std::exception& e) {
        log_line(kTopic, std::string("warning: ignoring FLOW_CACHE_MAX_SIZE: ") + e.what());
      }
    }
    if (const char* ro = std::getenv("FLOW_CACHE_READONLY"); ro != nullptr) {
      std::string dirs = ro;
      size_t start = 0;
      while (start <= dirs.size()) {
        const size_t end = std::min(dirs.find(':', start), dirs.size());
        if (end > start) cache.add_readonly_directory(dirs.substr(start, end - start));
        start = end + 1;
      }
    }
    return true;
  }();
  (void)configured;
  return cache;
}

}  // namespace flow::jit

// Tests for jit/kernel_cache: keys, memory and disk round trips, rejection and repair of bad files,
// and concurrent writers in separate processes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "jit/cache_directory.h"
#include "jit/kernel_cache.h"
#include "jit/log.h"
#include "test_util.h"

namespace flow::jit {
namespace {

namespace fs = std::filesystem;

// A fresh, empty directory per test, removed at the end.
class TempDir {
 public:
  TempDir() {
    auto rng = flow::test::rng(0xD1);
    path_ = fs::temp_directory_path() /
            ("flow_kc_test_" + std::to_string(::getpid()) + "_" + std::to_string(rng() ^ counter()++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  static uint64_t& counter() {
    static uint64_t c = 0;
    return c;
  }
  fs::path path_;
};

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

CacheEntry make_entry(const std::string& source, const std::string& binary, double seconds = 0.25) {
  return CacheEntry{source, R"({"block":128,"vec":4})", seconds, binary};
}

Hash128 key_for(const std::string& source) {
  return kernel_cache_key(source, "{}", "cuda", "sm_90", "nvrtc-13.0", "");
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

void expect_same(const CacheEntry& a, const CacheEntry& b) {
  EXPECT_EQ(a.canonical_source, b.canonical_source);
  EXPECT_EQ(a.params_json, b.params_json);
  EXPECT_EQ(a.compile_seconds, b.compile_seconds);  // bit-exact round trip
  EXPECT_EQ(a.binary, b.binary);
}

// Every file under dir, relative.
std::vector<std::string> all_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_directory()) out.push_back(fs::relative(e.path(), dir).string());
  }
  return out;
}

TEST(KernelCacheKey, EveryFieldMatters) {
  const std::vector<std::string> base = {"loop nest", "{\"block\":128}", "cuda", "sm_90", "nvrtc-13.0", "-O3"};
  auto key = [](const std::vector<std::string>& f) { return kernel_cache_key(f[0], f[1], f[2], f[3], f[4], f[5]); };
  const Hash128 k0 = key(base);
  EXPECT_EQ(k0, key(base)) << "deterministic";
  std::set<std::pair<uint64_t, uint64_t>> seen = {{k0.lo, k0.hi}};
  for (size_t i = 0; i < base.size(); ++i) {
    auto changed = base;
    changed[i] += "x";
    const Hash128 k = key(changed);
    EXPECT_NE(k, k0) << "field " << i;
    seen.insert({k.lo, k.hi});
  }
  EXPECT_EQ(seen.size(), base.size() + 1);
  // Length prefixes: moving a byte across a field boundary changes the key.
  EXPECT_NE(kernel_cache_key("ab", "c", "", "", "", ""), kernel_cache_key("a", "bc", "", "", "", ""));
  EXPECT_NE(kernel_cache_key("", "", "", "", "", ""), kernel_cache_key("", "", "", "", "", std::string(1, '\0')));
  // Stable across runs and machines: a change here invalidates every user's cache, so it must come
  // with a bump of kKernelCacheKeySalt (and an update of this value). Checked independently:
  // XXH3_128 of the length-prefixed fields built in Python, printed high64 then low64.
  EXPECT_EQ(cache_key_hex(key(base)), "8d8e2fee396b35caec550c0afb5b4794");
}

TEST(KernelCacheKey, HexIs32LowercaseDigitsHiThenLo) {
  const Hash128 k{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(cache_key_hex(k), "fedcba98765432100123456789abcdef");
  EXPECT_EQ(cache_key_hex(k), k.hex());
}

TEST(KernelCache, MemoryOnlyRoundTrip) {
  KernelCache cache;
  EXPECT_EQ(cache.entry_path(key_for("a")), "");
  const CacheEntry e = make_entry("src a", std::string("bin\0ary", 7));
  const Hash128 k = key_for(e.canonical_source);
  EXPECT_FALSE(cache.lookup(k, e.canonical_source));
  cache.store(k, e);
  const auto hit = cache.lookup(k, e.canonical_source);
  ASSERT_TRUE(hit);
  expect_same(*hit, e);
  // Same key, other source: never returned.
  EXPECT_FALSE(cache.lookup(k, "another source"));
  cache.record_compile(1.5);
  cache.record_compile(0.5);
  const KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.stores, 1u);
  EXPECT_EQ(s.corrupt_entries, 0u);
  EXPECT_DOUBLE_EQ(s.compile_seconds, 2.0);
  cache.reset_stats();
  EXPECT_EQ(cache.stats().misses, 0u);
  EXPECT_EQ(cache.stats().compile_seconds, 0.0);
}

TEST(KernelCache, DiskRoundTripAcrossInstances) {
  TempDir dir;
  auto rng = flow::test::rng(3);
  const CacheEntry e = make_entry("kernel source\n", random_bytes(rng, 100000), 0.123456789);
  const Hash128 k = key_for(e.canonical_source);
  {
    KernelCache writer(dir.str());
    EXPECT_FALSE(writer.lookup(k, e.canonical_source));
    writer.store(k, e);
    EXPECT_TRUE(writer.lookup(k, e.canonical_source));
    EXPECT_EQ(writer.stats().memory_hits, 1u);
  }
  KernelCache reader(dir.str());
  const std::string hex = cache_key_hex(k);
  EXPECT_EQ(reader.entry_path(k), dir.str() + "/" + hex.substr(0, 2) + "/" + hex + ".fk");
  EXPECT_TRUE(fs::is_regular_file(reader.entry_path(k)));
  const auto hit = reader.lookup(k, e.canonical_source);
  ASSERT_TRUE(hit);
  expect_same(*hit, e);
  EXPECT_EQ(reader.stats().disk_hits, 1u);
  // Promoted to memory.
  ASSERT_TRUE(reader.lookup(k, e.canonical_source));
  EXPECT_EQ(reader.stats().memory_hits, 1u);
  EXPECT_EQ(reader.stats().disk_hits, 1u);
  // clear_memory goes back to disk.
  reader.clear_memory();
  ASSERT_TRUE(reader.lookup(k, e.canonical_source));
  EXPECT_EQ(reader.stats().disk_hits, 2u);
  EXPECT_EQ(all_files(dir.str()).size(), 1u) << "exactly one file, no temporaries";
}

TEST(KernelCache, EmptyPartsRoundTrip) {
  TempDir dir;
  const CacheEntry e{"", "", 0.0, ""};
  const Hash128 k = key_for("");
  KernelCache(dir.str()).store(k, e);
  KernelCache reader(dir.str());
  const auto hit = reader.lookup(k, "");
  ASSERT_TRUE(hit);
  expect_same(*hit, e);
  EXPECT_EQ(fs::file_size(reader.entry_path(k)), kKernelCacheHeaderSize + sizeof(double));
}

TEST(KernelCache, FileLayoutMatchesTheDesign) {
  const CacheEntry e = make_entry("SRC", "BIN", 2.0);
  const Hash128 k{0x1122334455667788ULL, 0x99aabbccddeeff00ULL};
  const std::string bytes = encode_cache_entry(k, e);
  ASSERT_EQ(bytes.size(), kKernelCacheHeaderSize + 3 + e.params_json.size() + 8 + 3);
  EXPECT_EQ(bytes.substr(0, 8), "FLOWKC01");
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x01\x00\x00\x00", 4));
  EXPECT_EQ(bytes.substr(12, 8), std::string("\x88\x77\x66\x55\x44\x33\x22\x11", 8));  // key.lo, little-endian
  EXPECT_EQ(bytes.substr(kKernelCacheHeaderSize, 3), "SRC");
  EXPECT_EQ(bytes.substr(bytes.size() - 3), "BIN");
  std::string why;
  const auto back = decode_cache_entry(k, bytes, &why);
  ASSERT_TRUE(back) << why;
  expect_same(*back, e);
  EXPECT_FALSE(decode_cache_entry(Hash128{k.lo, k.hi + 1}, bytes, &why));
  EXPECT_NE(why.find("another key"), std::string::npos) << why;
}

// Stores e under k, damages the file with `damage`, and checks that a fresh cache misses and counts
// one corrupt entry, that lookup does not throw, and that the next store repairs it.
template <typename Damage>
void check_rejected_then_repaired(const std::string& dir, const CacheEntry& e, Damage damage) {
  const Hash128 k = key_for(e.canonical_source);
  KernelCache(dir).store(k, e);
  const std::string path = KernelCache(dir).entry_path(k);
  damage(path);
  KernelCache reader(dir);
  std::optional<CacheEntry> got;
  EXPECT_NO_THROW(got = reader.lookup(k, e.canonical_source));
  EXPECT_FALSE(got);
  EXPECT_EQ(reader.stats().misses, 1u);
  EXPECT_EQ(reader.stats().corrupt_entries, 1u);
  EXPECT_EQ(reader.stats().disk_hits, 0u);
  reader.store(k, e);  // repairs the file
  KernelCache again(dir);
  const auto hit = again.lookup(k, e.canonical_source);
  ASSERT_TRUE(hit);
  expect_same(*hit, e);
  EXPECT_EQ(again.stats().disk_hits, 1u);
  EXPECT_EQ(again.stats().corrupt_entries, 0u);
}

TEST(KernelCache, TruncatedFilesAreRejected) {
  TempDir dir;
  auto rng = flow::test::rng(4);
  const CacheEntry e = make_entry("truncate me", random_bytes(rng, 5000));
  const size_t full = encode_cache_entry(key_for(e.canonical_source), e).size();
  for (const size_t keep : {size_t{0}, size_t{7}, kKernelCacheHeaderSize - 1, kKernelCacheHeaderSize,
                            kKernelCacheHeaderSize + 5, full / 2, full - 1, static_cast<size_t>(rng() % full)}) {
    SCOPED_TRACE("keep " + std::to_string(keep));
    check_rejected_then_repaired(dir.str(), e, [&](const std::string& path) { fs::resize_file(path, keep); });
  }
  // Extra bytes after a valid entry are rejected too.
  check_rejected_then_repaired(dir.str(), e, [](const std::string& path) { write_file(path, read_file(path) + "x"); });
}

TEST(KernelCache, EveryFlippedByteIsRejected) {
  TempDir dir;
  auto rng = flow::test::rng(5);
  const CacheEntry e = make_entry("flip", random_bytes(rng, 40), 3.5);
  const Hash128 k = key_for(e.canonical_source);
  const std::string good = encode_cache_entry(k, e);
  KernelCache(dir.str()).store(k, e);
  const std::string path = KernelCache(dir.str()).entry_path(k);
  ASSERT_EQ(read_file(path), good);
  for (size_t pos = 0; pos < good.size(); ++pos) {
    std::string bad = good;
    bad[pos] = static_cast<char>(bad[pos] ^ static_cast<char>(1 + rng() % 255));
    write_file(path, bad);
    KernelCache reader(dir.str());
    ASSERT_FALSE(reader.lookup(k, e.canonical_source)) << "flipped byte " << pos;
    ASSERT_EQ(reader.stats().corrupt_entries, 1u) << "flipped byte " << pos;
  }
  check_rejected_then_repaired(dir.str(), e, [&](const std::string& p) {
    std::string bad = good;
    bad[rng() % bad.size()] ^= 0x40;
    write_file(p, bad);
  });
}

TEST(KernelCache, ForeignFilesAreRejected) {
  TempDir dir;
  auto rng = flow::test::rng(6);
  const CacheEntry e = make_entry("foreign", random_bytes(rng, 300));
  // Random bytes of random length.
  check_rejected_then_repaired(dir.str(), e,
                               [&](const std::string& path) { write_file(path, random_bytes(rng, rng() % 2000)); });
  // Wrong magic, otherwise a valid entry.
  check_rejected_then_repaired(dir.str(), e, [&](const std::string& path) {
    std::string bytes = read_file(path);
    bytes.replace(0, 8, "FLOWKC99");
    write_file(path, bytes);
  });
  // A newer file format version.
  check_rejected_then_repaired(dir.str(), e, [&](const std::string& path) {
    std::string bytes = read_file(path);
    bytes[8] = static_cast<char>(kKernelCacheFileVersion + 1);
    write_file(path, bytes);
  });
  // A valid entry of another key copied to this key's path.
  check_rejected_then_repaired(dir.str(), e, [&](const std::string& path) {
    const CacheEntry other = make_entry("other", "x");
    write_file(path, encode_cache_entry(key_for(other.canonical_source), other));
  });
  // A header whose lengths are huge but whose file is small.
  check_rejected_then_repaired(dir.str(), e, [&](const std::string& path) {
    std::string bytes = read_file(path);
    for (int i = 0; i < 8; ++i) bytes[28 + i] = static_cast<char>(0xFF);
    write_file(path, bytes);
  });
}

TEST(KernelCache, MismatchedSourceIsRejected) {
  TempDir dir;
  const Hash128 k = key_for("the real source");
  KernelCache writer(dir.str());
  writer.store(k, make_entry("a different source under the same key", "bin1"));
  KernelCache reader(dir.str());
  EXPECT_FALSE(reader.lookup(k, "the real source"));
  EXPECT_EQ(reader.stats().corrupt_entries, 1u);
  EXPECT_EQ(reader.stats().misses, 1u);
  const CacheEntry good = make_entry("the real source", "bin2");
  reader.store(k, good);
  KernelCache again(dir.str());
  const auto hit = again.lookup(k, "the real source");
  ASSERT_TRUE(hit);
  expect_same(*hit, good);
}

TEST(KernelCache, UnusablePathsNeverThrow) {
  TempDir dir;
  const CacheEntry e = make_entry("odd paths", "bin");
  const Hash128 k = key_for(e.canonical_source);
  // A directory where the entry file should be.
  {
    KernelCache cache(dir.str());
    fs::create_directories(cache.entry_path(k));
    std::optional<CacheEntry> got;
    EXPECT_NO_THROW(got = cache.lookup(k, e.canonical_source));
    EXPECT_FALSE(got);
    EXPECT_EQ(cache.stats().corrupt_entries, 1u);
    EXPECT_NO_THROW(cache.store(k, e));  // rename onto a directory fails: logged, swallowed
    EXPECT_TRUE(cache.lookup(k, e.canonical_source)) << "still served from memory";
  }
  // The cache directory is below a regular file: nothing can be created.
  {
    const std::string file = dir.str() + "/plain_file";
    write_file(file, "not a directory");
    KernelCache cache(file + "/cache");
    EXPECT_NO_THROW(cache.store(k, e));
    EXPECT_TRUE(cache.lookup(k, e.canonical_source));
    KernelCache fresh(file + "/cache");
    EXPECT_FALSE(fresh.lookup(k, e.canonical_source));
    EXPECT_EQ(fresh.stats().corrupt_entries, 0u) << "ENOTDIR is an ordinary miss";
  }
}

TEST(KernelCache, ThreadsShareOneCache) {
  TempDir dir;
  KernelCache cache(dir.str());
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string src = "thread kernel " + std::to_string((i + t) % 23);
        const Hash128 k = key_for(src);
        if (const auto hit = cache.lookup(k, src)) {
          if (hit->binary != "binary of " + src) bad.fetch_add(1);
        } else {
          cache.store(k, make_entry(src, "binary of " + src));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  const KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.memory_hits + s.disk_hits + s.misses, 800u);
  EXPECT_EQ(s.corrupt_entries, 0u);
}

// The binary for key index i: its size varies up to ~200 KiB so that writes span many pages.
std::string binary_for(int i) {
  std::mt19937_64 gen(static_cast<uint64_t>(i) * 7919 + 1);
  return random_bytes(gen, 1000 + static_cast<size_t>(i % 7) * 30000);
}
std::string source_for(int i) {
  return "concurrent kernel #" + std::to_string(i);
}

TEST(KernelCache, ConcurrentProcessesNeverSeeHalfAnEntry) {
  TempDir dir;
  constexpr int kChildren = 6;
  constexpr int kShared = 8;    // keys 0..7: every child writes them
  constexpr int kPerChild = 4;  // keys 100 + 10*c + j: one child each
  constexpr int kIterations = 60;
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      // Child: no gtest assertions (they would report in the wrong process); exit code = errors.
      int errors = 0;
      std::mt19937_64 rng(static_cast<uint64_t>(c) * 1000003 + static_cast<uint64_t>(::getpid()));
      KernelCache writer(dir.str());
      for (int it = 0; it < kIterations; ++it) {
        const int i =
            (rng() % 2 == 0) ? static_cast<int>(rng() % kShared) : 100 + 10 * c + static_cast<int>(rng() % kPerChild);
        const std::string src = source_for(i);
        const Hash128 k = key_for(src);
        const CacheEntry e{src, "{\"i\":" + std::to_string(i) + "}", static_cast<double>(i), binary_for(i)};
        KernelCache reader(dir.str());  // fresh memory: always reads the disk
        if (const auto hit = reader.lookup(k, src)) {
          if (hit->binary != e.binary || hit->params_json != e.params_json || hit->compile_seconds != i) ++errors;
        }
        if (reader.stats().corrupt_entries != 0) ++errors;
        writer.store(k, e);
      }
      if (writer.stats().corrupt_entries != 0) ++errors;
      ::_exit(errors > 100 ? 100 : errors);
    }
    pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "child crashed";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child saw a torn or wrong entry";
  }
  // Every entry that was written reads back intact, and only final .fk files remain.
  KernelCache reader(dir.str());
  int found = 0;
  std::vector<int> keys;
  for (int i = 0; i < kShared; ++i) keys.push_back(i);
  for (int c = 0; c < kChildren; ++c)
    for (int j = 0; j < kPerChild; ++j) keys.push_back(100 + 10 * c + j);
  for (const int i : keys) {
    const Hash128 k = key_for(source_for(i));
    if (!fs::exists(reader.entry_path(k))) continue;  // never drawn by the random schedule
    const auto hit = reader.lookup(k, source_for(i));
    ASSERT_TRUE(hit) << "entry " << i;
    EXPECT_EQ(hit->binary, binary_for(i));
    ++found;
  }
  EXPECT_GT(found, kShared / 2);
  EXPECT_EQ(reader.stats().corrupt_entries, 0u);
  for (const std::string& f : all_files(dir.str())) {
    EXPECT_EQ(fs::path(f).extension(), ".fk") << "leftover file " << f;
    EXPECT_NE(fs::path(f).filename().string()[0], '.') << "leftover temporary " << f;
  }
  EXPECT_EQ(static_cast<int>(all_files(dir.str()).size()), found);
}

TEST(KernelCache, ReadOnlyLayersAreConsultedFirstAndNeverWritten) {
  TempDir shipped, own;
  const std::string src = "shipped kernel";
  const Hash128 k = key_for(src);
  {
    KernelCache writer(shipped.str());
    writer.store(k, make_entry(src, "shipped binary"));
  }
  const auto shipped_files = all_files(shipped.str());
  KernelCache cache(own.str());
  cache.add_readonly_directory(shipped.str());
  cache.add_readonly_directory(shipped.str());  // no-op
  EXPECT_EQ(cache.readonly_directories().size(), 1u);
  const auto hit = cache.lookup(k, src);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->binary, "shipped binary");
  EXPECT_EQ(cache.stats().disk_hits, 1u);
  EXPECT_EQ(cache.stats().readonly_hits, 1u);
  EXPECT_TRUE(all_files(own.str()).empty());
  // A store goes to the own directory only.
  const std::string src2 = "user kernel";
  cache.store(key_for(src2), make_entry(src2, "user binary"));
  EXPECT_EQ(all_files(shipped.str()), shipped_files);
  EXPECT_EQ(all_files(own.str()).size(), 1u);
  // A corrupt shipped entry is skipped: the own directory still serves the key.
  const std::string src3 = "both";
  {
    KernelCache w1(shipped.str()), w2(own.str());
    w1.store(key_for(src3), make_entry(src3, "s"));
    w2.store(key_for(src3), make_entry(src3, "o"));
  }
  write_file(KernelCache(shipped.str()).entry_path(key_for(src3)), "garbage");
  KernelCache fresh(own.str());
  fresh.add_readonly_directory(shipped.str());
  const auto h3 = fresh.lookup(key_for(src3), src3);
  ASSERT_TRUE(h3);
  EXPECT_EQ(h3->binary, "o");
  EXPECT_EQ(fresh.stats().corrupt_entries, 1u);
  EXPECT_EQ(read_file(KernelCache(shipped.str()).entry_path(key_for(src3))), "garbage");  // untouched
  fresh.remove_readonly_directory(shipped.str());
  EXPECT_TRUE(fresh.readonly_directories().empty());
}

TEST(CacheDirectory, PruneEvictsLeastRecentlyUsedAndHitsRefreshRecency) {
  TempDir dir;
  KernelCache cache(dir.str());
  std::vector<std::string> srcs;
  for (int i = 0; i < 6; ++i) {
    srcs.push_back("kernel " + std::to_string(i));
    cache.store(key_for(srcs.back()), make_entry(srcs.back(), std::string(1000, static_cast<char>('a' + i))));
  }
  // Age them: entry i last used i*100 s ago ... entry 0 the oldest.
  const auto now = fs::file_time_type::clock::now();
  for (int i = 0; i < 6; ++i)
    fs::last_write_time(cache.entry_path(key_for(srcs[i])), now - std::chrono::seconds(1000 - 100 * i));
  // A hit on the oldest makes it the newest.
  KernelCache reader(dir.str());
  ASSERT_TRUE(reader.lookup(key_for(srcs[0]), srcs[0]));
  const auto files = list_cache_files(dir.str());
  ASSERT_EQ(files.size(), 6u);
  EXPECT_EQ(files.back().path, cache.entry_path(key_for(srcs[0])));
  const uint64_t each = files[0].bytes;
  const PruneResult r = prune_cache_directory(dir.str(), 3 * each);
  EXPECT_EQ(r.removed_files, 3);
  EXPECT_EQ(r.remaining_files, 3);
  EXPECT_EQ(r.remaining_bytes, 3 * each);
  for (int i : {1, 2, 3}) EXPECT_FALSE(fs::exists(cache.entry_path(key_for(srcs[i])))) << i;
  for (int i : {0, 4, 5}) EXPECT_TRUE(fs::exists(cache.entry_path(key_for(srcs[i])))) << i;
  const CacheEntryInfo info = describe_cache_file(cache.entry_path(key_for(srcs[4])));
  EXPECT_FALSE(info.ok);  // not a loop nest: the canonical source is a test string
  EXPECT_FALSE(info.why.empty());
  EXPECT_EQ(clear_cache_directory(dir.str()).removed_files, 3);
  EXPECT_EQ(summarize_cache_directory(dir.str()).files, 0);
}

TEST(CacheDirectory, SizeCapEvictsOnStore) {
  TempDir dir;
  KernelCache cache(dir.str());
  const uint64_t entry_bytes = encode_cache_entry(key_for("s0"), make_entry("s0", std::string(4000, 'x'))).size();
  cache.set_max_bytes(5 * entry_bytes);
  for (int i = 0; i < 20; ++i) {
    const std::string src = "s" + std::to_string(i);
    cache.store(key_for(src), make_entry(src, std::string(4000, 'x')));
    EXPECT_LE(summarize_cache_directory(dir.str()).bytes, 5 * entry_bytes) << i;
  }
  EXPECT_GT(cache.stats().evicted, 0u);
  // The newest entry always survives its own store.
  EXPECT_TRUE(fs::exists(cache.entry_path(key_for("s19"))));
}

TEST(CacheDirectory, ConcurrentStoresAndEvictionsStayConsistent) {
  TempDir dir;
  const uint64_t entry_bytes = encode_cache_entry(key_for("c0"), make_entry("c0", std::string(2000, 'y'))).size();
  std::vector<pid_t> pids;
  for (int c = 0; c < 4; ++c) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int errors = 0;
      KernelCache cache(dir.str());
      cache.set_max_bytes(8 * entry_bytes);
      for (int i = 0; i < 40; ++i) {
        const std::string src = "c" + std::to_string((i * 7 + c) % 24);
        KernelCache reader(dir.str());
        if (const auto hit = reader.lookup(key_for(src), src)) errors += hit->binary != std::string(2000, 'y');
        errors += reader.stats().corrupt_entries != 0;
        cache.store(key_for(src), make_entry(src, std::string(2000, 'y')));
      }
      ::_exit(errors > 100 ? 100 : errors);
    }
    pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  // Every remaining file is a whole entry.
  for (const auto& f : list_cache_files(dir.str())) {
    const std::string bytes = read_file(f.path);
    Hash128 key;
    key.hi = std::stoull(f.key_hex.substr(0, 16), nullptr, 16);
    key.lo = std::stoull(f.key_hex.substr(16), nullptr, 16);
    EXPECT_TRUE(decode_cache_entry(key, bytes).has_value()) << f.path;
  }
}

TEST(CacheDirectory, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("1024"), 1024u);
  EXPECT_EQ(parse_byte_size("500K"), 500u * 1024);
  EXPECT_EQ(parse_byte_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_byte_size("10 MB"), 10ull << 20);
  for (const char* bad : {"", "big", "10X", "-5M", "nanG"}) EXPECT_THROW(parse_byte_size(bad), std::invalid_argument) << bad;
}

TEST(KernelCache, GlobalCacheHonoursTheEnvironmentOnFirstUse) {
  // Only checks what the first use can observe in this process.
  const char* disable = std::getenv("FLOW_DISABLE_DISK_CACHE");
  const char* dir = std::getenv("FLOW_CACHE_DIR");
  KernelCache& g = global_kernel_cache();
  EXPECT_EQ(&g, &global_kernel_cache());
  if (disable != nullptr && std::string(disable) == "1") {
    EXPECT_EQ(g.directory(), "");
  } else if (dir != nullptr) {
    EXPECT_EQ(g.directory(), dir);
  } else {
    EXPECT_NE(g.directory().find("flow/kernels"), std::string::npos) << g.directory();
  }
}

TEST(Log, TopicsParse) {
  EXPECT_TRUE(log_spec_enables("cache", "cache"));
  EXPECT_TRUE(log_spec_enables("fusion, Cache ,codegen", "cache"));
  EXPECT_TRUE(log_spec_enables("all", "anything"));
  EXPECT_TRUE(log_spec_enables("fusion,ALL", "cache"));
  EXPECT_FALSE(log_spec_enables("", "cache"));
  EXPECT_FALSE(log_spec_enables("fusion,codegen", "cache"));
  EXPECT_FALSE(log_spec_enables("caches", "cache"));
  EXPECT_FALSE(log_spec_enables(",,", "cache"));
}

}  // namespace
}  // namespace flow::jit

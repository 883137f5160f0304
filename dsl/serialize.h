// Note: canonical, pointer-free serialization of the IR into bytes, and XXH3-128 hashing of those
// bytes. The encoding is versioned (kSerializeFormat) and independent of the process, the pointer
// values and std::hash, so a key computed today matches the key computed by another process or
// machine. Floating constants are encoded by their IEEE bits.
#pragma once
#include <cstdint>
#include <string>

#include "dsl/expr.h"
#include "dsl/stmt.h"

namespace flow::dsl {

inline constexpr uint32_t kSerializeFormat = 1;

// Appends a canonical encoding to `out` (a byte string).
void serialize(const Expr& e, std::string& out);
void serialize(const Stmt& s, std::string& out);
void serialize(const LoweredFunc& f, std::string& out);
// Decoding (round-trips serialize); throws std::runtime_error on malformed input.
LoweredFunc deserialize_func(const std::string& bytes);

struct Hash128 {
  uint64_t lo = 0, hi = 0;
  bool operator==(const Hash128& o) const { return lo == o.lo && hi == o.hi; }
  bool operator!=(const Hash128& o) const { return !(*this == o); }
  std::string hex() const;  // 32 lowercase hex digits
};
Hash128 xxh3_128(const std::string& bytes);

}  // namespace flow::dsl

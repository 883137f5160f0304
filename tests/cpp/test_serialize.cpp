// Tests of the canonical serialization and XXH3-128 hashing: round trips of random IR, malformed
// input, hash stability across processes (the test re-executes its own binary) and sensitivity of
// the hash to every single field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>

#include "dsl/ir_visitor.h"
#include "dsl/serialize.h"
#include "test_util.h"

namespace flow::dsl {
namespace {

class RandomIR {
 public:
  explicit RandomIR(std::mt19937_64& r) : rng_(r) {}
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // An expression of type t (Bool, Int32, Int64, Float32 or Float64).
  Expr gen(DType t, int depth) {
    if (depth == 0 || pick(0, 5) == 0) return leaf(t);
    if (t == DType::Bool) {
      switch (pick(0, 3)) {
        case 0:
          return gen(DType::Int64, depth - 1) < gen(DType::Int64, depth - 1);
        case 1:
          return gen(DType::Bool, depth - 1) && gen(DType::Bool, depth - 1);
        case 2:
          return !gen(DType::Bool, depth - 1);
        default:
          return call(Intrinsic::IsNan, {gen(DType::Float32, depth - 1)});
      }
    }
    const bool fl = is_floating(t);
    switch (pick(0, 7)) {
      case 0:
        return make_binary(
            static_cast<ExprKind>(pick(static_cast<int>(ExprKind::Add), static_cast<int>(ExprKind::Max))),
            gen(t, depth - 1), gen(t, depth - 1));
      case 1:
        return select(gen(DType::Bool, depth - 1), gen(t, depth - 1), gen(t, depth - 1));
      case 2:
        return load(t, "buf" + std::to_string(pick(0, 2)), gen(DType::Int64, depth - 1));
      case 3:
        return cast(t, gen(fl ? DType::Int64 : DType::Float64, depth - 1));
      case 4:
        if (fl) {
          const Intrinsic f = static_cast<Intrinsic>(pick(0, static_cast<int>(Intrinsic::Ceil)));
          if (intrinsic_arity(f) == 2) return call(f, {gen(t, depth - 1), gen(t, depth - 1)});
          return call(f, {gen(t, depth - 1)});
        }
        return call(Intrinsic::Abs, {gen(t, depth - 1)});
      case 5:
        return cast(t, load(DType::Float16, "h", gen(DType::Int64, depth - 1)));
      case 6:  // the bits of a same-sized value of the other kind
        if (t == DType::Int32 || t == DType::Float32 || t == DType::Int64 || t == DType::Float64) {
          const bool wide = dtype_size(t) == 8;
          return reinterpret(
              t, gen(fl ? (wide ? DType::Int64 : DType::Int32) : (wide ? DType::Float64 : DType::Float32), depth - 1));
        }
        return gen(t, depth - 1);
      default:
        return gen(t, depth - 1) * gen(t, depth - 1);
    }
  }
  Expr leaf(DType t) {
    switch (t) {
      case DType::Bool:
        return pick(0, 1) ? make_bool(pick(0, 1)) : var("p", DType::Bool);
      case DType::Int32:
      case DType::Int64:
        return pick(0, 1) ? make_int(pick(-1000, std::numeric_limits<int32_t>::max()), t)
                          : var("i" + std::to_string(pick(0, 3)), t);
      default: {
        static const double specials[] = {
            0.0, -0.0, 1.5, 1e-300, -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
        if (pick(0, 2) == 0) return var("x" + std::to_string(pick(0, 3)), t);
        const double v =
            pick(0, 1) ? specials[pick(0, 5)]
                       : std::ldexp(static_cast<double>(pick(-1000000, 1000000)), static_cast<int>(pick(-40, 40)));
        return make_float(v, t);
      }
    }
  }
  Stmt stmt(int depth) {
    if (depth == 0) return make_store("out", gen(DType::Int64, 2), gen(DType::Float32, 3));
    switch (pick(0, 7)) {
      case 0:
        return make_for("v" + std::to_string(depth), gen(DType::Int64, 1), gen(DType::Int64, 2),
                        static_cast<ForKind>(pick(0, 1)), stmt(depth - 1));
      case 1:
        return make_for("g", 0, 8, ForKind::Unrolled, stmt(depth - 1));
      case 2:
        return make_let("t" + std::to_string(depth), gen(DType::Float64, 2), stmt(depth - 1));
      case 3:
        return make_if(gen(DType::Bool, 2), stmt(depth - 1), pick(0, 1) ? stmt(depth - 1) : Stmt());
      case 4:
        return make_allocate("acc", DType::Float32, pick(1, 64), static_cast<MemoryScope>(pick(0, 1)), stmt(depth - 1));
      case 5:
        return make_block({stmt(depth - 1), make_barrier(),
                           make_block_reduce(static_cast<ReduceOp>(pick(0, 2)), "acc", DType::Float32)});
      case 6:
        return make_for("b", 0, var("n"), ForKind::GPUBlock, stmt(depth - 1), static_cast<int>(pick(0, 2)));
      default:
        return make_block({stmt(depth - 1), stmt(depth - 1)});
    }
  }

 private:
  std::mt19937_64& rng_;
};

LoweredFunc fixed_func() {
  Expr i = var("i"), n = var("n");
  LoweredFunc f;
  f.name = "axpy";
  f.target = Target::CUDA;
  f.params = {{"out", ParamKind::Buffer, DType::Float32, true},
              {"x", ParamKind::Buffer, DType::Float32, false},
              {"a", ParamKind::Scalar, DType::Float32, false},
              {"n", ParamKind::Scalar, DType::Int64, false}};
  Stmt body = make_if(
      i < n,
      make_store("out", i, var("a", DType::Float32) * load(DType::Float32, "x", i) + make_float(0.5, DType::Float32)));
  f.body = make_for("b", 0, (n + 255) / 256, ForKind::GPUBlock,
                    make_for("t", 0, 256, ForKind::GPUThread, make_let("i", var("b") * 256 + var("t"), body)));
  f.grid[0] = (n + 255) / 256;
  f.grid[1] = Expr(1);
  f.grid[2] = Expr(1);
  f.block[0] = Expr(256);
  f.block[1] = Expr(1);
  f.block[2] = Expr(1);
  f.shared_bytes = 0;
  return f;
}

std::string bytes_of(const LoweredFunc& f) {
  std::string s;
  serialize(f, s);
  return s;
}
Hash128 hash_of(const LoweredFunc& f) {
  return xxh3_128(bytes_of(f));
}

TEST(Serialize, RandomRoundTrip) {
  auto rng = test::rng(11);
  RandomIR gen(rng);
  for (int iter = 0; iter < 300; ++iter) {
    LoweredFunc f;
    f.name = "k" + std::to_string(iter);
    f.target = static_cast<Target>(gen.pick(0, 1));
    f.params = {{"out", ParamKind::Buffer, DType::Float32, true}, {"n", ParamKind::Scalar, DType::Int64, false}};
    f.body = gen.stmt(3);
    f.grid[0] = gen.gen(DType::Int64, 3);
    f.block[1] = gen.gen(DType::Int64, 2);
    f.shared_bytes = gen.pick(0, 1 << 20);
    const std::string bytes = bytes_of(f);
    const LoweredFunc g = deserialize_func(bytes);
    ASSERT_EQ(bytes_of(g), bytes) << to_string(f);
    EXPECT_TRUE(equal(f.body, g.body));
    EXPECT_EQ(g.name, f.name);
    EXPECT_EQ(g.target, f.target);
    EXPECT_EQ(g.shared_bytes, f.shared_bytes);
    EXPECT_TRUE(equal(f.grid[0], g.grid[0]));
    EXPECT_FALSE(g.grid[1].defined());
    EXPECT_EQ(to_string(g), to_string(f));
  }
  for (int iter = 0; iter < 300; ++iter) {  // expressions of every type
    static const DType types[] = {DType::Bool, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
    const Expr e = gen.gen(types[gen.pick(0, 4)], 6);
    LoweredFunc f;
    f.body = make_store("o", Expr(0), e);
    const LoweredFunc g = deserialize_func(bytes_of(f));
    ASSERT_TRUE(equal(g.body, f.body)) << to_string(e);
    const Expr& back = g.body.as<Store>()->value;
    EXPECT_EQ(back.type(), e.type());
    std::string a, b;
    serialize(e, a);
    serialize(back, b);
    EXPECT_EQ(a, b);
  }
}

TEST(Serialize, FloatsByBits) {
  std::string a, b, c;
  serialize(make_float(0.0, DType::Float64), a);
  serialize(make_float(-0.0, DType::Float64), b);
  serialize(make_float(0.0, DType::Float32), c);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);                    // the dtype is part of the encoding
  EXPECT_EQ(a.size(), 1u + 1u + 8u);  // tag, dtype, IEEE bits
}

TEST(Serialize, MalformedInputThrows) {
  const std::string good = bytes_of(fixed_func());
  EXPECT_NO_THROW(deserialize_func(good));
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(deserialize_func(good.substr(0, n)), std::runtime_error) << "prefix " << n;
  }
  EXPECT_THROW(deserialize_func(good + "x"), std::runtime_error);
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_THROW(deserialize_func(bad_magic), std::runtime_error);
  std::string bad_version = good;
  bad_version[4] = static_cast<char>(kSerializeFormat + 1);
  EXPECT_THROW(deserialize_func(bad_version), std::runtime_error);
  // Random corruption never crashes: it either decodes or throws std::runtime_error.
  auto rng = test::rng(13);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s = good;
    s[std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng)] = static_cast<char>(rng());
    try {
      (void)deserialize_func(s);
    } catch (const std::runtime_error&) {
    }
  }
}

TEST(Hash, HexAndKnownValue) {
  EXPECT_EQ(xxh3_128("").hex(), "99aa06d3014798d86001c324468d497f");  // XXH3-128 of empty input
  Hash128 h;
  h.hi = 0x0123456789abcdefULL;
  h.lo = 0xfedcba9876543210ULL;
  EXPECT_EQ(h.hex(), "0123456789abcdeffedcba9876543210");
  EXPECT_NE(xxh3_128("a"), xxh3_128("b"));
  EXPECT_EQ(xxh3_128("abc"), xxh3_128(std::string("abc")));
}

// Prints the hash of fixed_func() when run as the child of SameAcrossProcesses.
TEST(Hash, ChildPrintsHash) {
  const std::string hex = hash_of(fixed_func()).hex();
  ASSERT_EQ(hex.size(), 32u);
  if (std::getenv("FLOW_HASH_CHILD")) std::printf("FLOW_HASH=%s\n", hex.c_str());
}

TEST(Hash, SameAcrossProcesses) {
  if (std::getenv("FLOW_HASH_CHILD")) GTEST_SKIP() << "child process";
  const std::string cmd =
      "FLOW_HASH_CHILD=1 /proc/" + std::to_string(getpid()) + "/exe --gtest_filter=Hash.ChildPrintsHash 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0) << out;
  const size_t at = out.find("FLOW_HASH=");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.substr(at + 10, 32), hash_of(fixed_func()).hex()) << out;
}

TEST(Hash, ChangesWithEverySingleField) {
  const LoweredFunc base = fixed_func();
  const Hash128 h0 = hash_of(base);
  EXPECT_EQ(h0, hash_of(fixed_func()));
  EXPECT_EQ(h0, hash_of(deserialize_func(bytes_of(base))));
  using Edit = std::function<void(LoweredFunc&)>;
  Expr i = var("i"), n = var("n");
  // Rebuilds the body with one piece replaced.
  auto body_with = [&](Expr scale, Expr half, ForKind inner_kind, const std::string& tvar, int64_t threads) {
    Stmt body = make_if(i < n, make_store("out", i, scale * load(DType::Float32, "x", i) + half));
    return make_for("b", 0, (n + 255) / 256, ForKind::GPUBlock,
                    make_for(tvar, 0, threads, inner_kind, make_let("i", var("b") * 256 + var(tvar), body)));
  };
  Expr a = var("a", DType::Float32);
  Expr half = make_float(0.5, DType::Float32);
  ASSERT_EQ(h0, [&] {
    LoweredFunc f = fixed_func();
    f.body = body_with(a, half, ForKind::GPUThread, "t", 256);
    return hash_of(f);
  }());
  const std::vector<std::pair<const char*, Edit>> edits = {
      {"constant",
       [&](LoweredFunc& f) { f.body = body_with(a, make_float(0.25, DType::Float32), ForKind::GPUThread, "t", 256); }},
      {"constant -0",
       [&](LoweredFunc& f) { f.body = body_with(a, make_float(-0.0, DType::Float32), ForKind::GPUThread, "t", 256); }},
      {"constant dtype", [](LoweredFunc& f) { f.grid[1] = make_int(1, DType::Int32); }},
      {"for kind", [&](LoweredFunc& f) { f.body = body_with(a, half, ForKind::Serial, "t", 256); }},
      {"var name", [&](LoweredFunc& f) { f.body = body_with(a, half, ForKind::GPUThread, "u", 256); }},
      {"loop extent", [&](LoweredFunc& f) { f.body = body_with(a, half, ForKind::GPUThread, "t", 128); }},
      {"param dtype", [](LoweredFunc& f) { f.params[2].dtype = DType::Float64; }},
      {"param name", [](LoweredFunc& f) { f.params[1].name = "y"; }},
      {"param kind", [](LoweredFunc& f) { f.params[2].kind = ParamKind::Buffer; }},
      {"param output", [](LoweredFunc& f) { f.params[1].is_output = true; }},
      {"param order", [](LoweredFunc& f) { std::swap(f.params[0], f.params[1]); }},
      {"func name", [](LoweredFunc& f) { f.name = "axpy2"; }},
      {"target", [](LoweredFunc& f) { f.target = Target::CPU; }},
      {"grid", [](LoweredFunc& f) { f.grid[1] = Expr(2); }},
      {"block", [](LoweredFunc& f) { f.block[0] = Expr(128); }},
      {"block undefined", [](LoweredFunc& f) { f.block[2] = Expr(); }},
      {"shared bytes", [](LoweredFunc& f) { f.shared_bytes = 4; }},
  };
  for (const auto& [what, edit] : edits) {
    LoweredFunc f = fixed_func();
    edit(f);
    if (!f.body.defined()) continue;
    EXPECT_NE(hash_of(f), h0) << what;
  }
}

}  // namespace
}  // namespace flow::dsl

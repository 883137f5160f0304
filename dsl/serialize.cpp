// Note: the canonical encoding. Every node is a tag byte (1 + its kind's position in the X-macro
// list; 0 encodes an undefined handle) followed by its fields in declaration order: an expression
// node's dtype byte first, integers as little-endian fixed width (int64 values and sizes 8 bytes,
// counts and string lengths 4 bytes, enums and axes 1 byte), strings as length + bytes, doubles
// as their IEEE-754 bits (so -0.0 and NaN payloads are kept). A LoweredFunc starts with the magic
// "FLWF" and kSerializeFormat. Appending a node kind to an X-macro list keeps old encodings valid;
// reordering one changes them, and must bump kSerializeFormat.
//
// Decoding rebuilds nodes exactly as encoded (no builder normalisation, so the round trip is
// exact); it checks bounds, tags, enum ranges and nesting depth, and throws std::runtime_error.
#include "dsl/serialize.h"

#include <cstring>
#include <stdexcept>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace flow::dsl {

namespace {

constexpr char kMagic[4] = {'F', 'L', 'W', 'F'};
constexpr int kMaxDepth = 10000;

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }

  void expr(const Expr& e) {
    if (!e.defined()) {
      u8(0);
      return;
    }
    u8(static_cast<uint8_t>(static_cast<uint8_t>(e.kind()) + 1));
    u8(static_cast<uint8_t>(e.type()));
    switch (e.kind()) {
      case ExprKind::IntImm:
        i64(e.as<IntImm>()->value);
        return;
      case ExprKind::FloatImm:
        f64(e.as<FloatImm>()->value);
        return;
      case ExprKind::Var:
        str(e.as<Var>()->name);
        return;
      case ExprKind::Cast:
        expr(e.as<Cast>()->value);
        return;
      case ExprKind::Reinterpret:
        expr(e.as<Reinterpret>()->value);
        return;
#define FLOW_X(name) case ExprKind::name:
        FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X
        {
          const auto* op = static_cast<const BinaryNode*>(e.get());
          expr(op->a);
          expr(op->b);
          return;
        }
      case ExprKind::Not:
        expr(e.as<Not>()->a);
        return;
      case ExprKind::Select: {
        const auto* op = e.as<Select>();
        expr(op->cond);
        expr(op->true_value);
        expr(op->false_value);
        return;
      }
      case ExprKind::Load: {
        const auto* op = e.as<Load>();
        str(op->buffer);
        expr(op->index);
        return;
      }
      case ExprKind::Call: {
        const auto* op = e.as<Call>();
        u8(static_cast<uint8_t>(op->func));
        u32(static_cast<uint32_t>(op->args.size()));
        for (const Expr& a : op->args) expr(a);
        return;
      }
    }
  }

  void stmt(const Stmt& s) {
    if (!s.defined()) {
      u8(0);
      return;
    }
    u8(static_cast<uint8_t>(static_cast<uint8_t>(s.kind()) + 1));
    switch (s.kind()) {
      case StmtKind::For: {
        const auto* op = s.as<For>();
        str(op->var);
        expr(op->min);
        expr(op->extent);
        u8(static_cast<uint8_t>(op->kind));
        u8(static_cast<uint8_t>(op->axis));
        stmt(op->body);
        return;
      }
      case StmtKind::Store: {
        const auto* op = s.as<Store>();
        str(op->buffer);
        expr(op->index);
        expr(op->value);
        return;
      }
      case StmtKind::LetStmt: {
        const auto* op = s.as<LetStmt>();
        str(op->name);
        expr(op->value);
        stmt(op->body);
        return;
      }
      case StmtKind::IfThenElse: {
        const auto* op = s.as<IfThenElse>();
        expr(op->cond);
        stmt(op->then_case);
        stmt(op->else_case);
        return;
      }
      case StmtKind::Allocate: {
        const auto* op = s.as<Allocate>();
        str(op->name);
        u8(static_cast<uint8_t>(op->dtype));
        i64(op->size);
        u8(static_cast<uint8_t>(op->scope));
        stmt(op->body);
        return;
      }
      case StmtKind::Barrier:
        return;
      case StmtKind::BlockReduce: {
        const auto* op = s.as<BlockReduce>();
        u8(static_cast<uint8_t>(op->op));
        str(op->buffer);
        u8(static_cast<uint8_t>(op->dtype));
        return;
      }
      case StmtKind::Block: {
        const auto& stmts = s.as<Block>()->stmts;
        u32(static_cast<uint32_t>(stmts.size()));
        for (const Stmt& c : stmts) stmt(c);
        return;
      }
    }
  }

  void func(const LoweredFunc& f) {
    out_.append(kMagic, sizeof kMagic);
    u32(kSerializeFormat);
    str(f.name);
    u8(static_cast<uint8_t>(f.target));
    u32(static_cast<uint32_t>(f.params.size()));
    for (const Param& p : f.params) {
      str(p.name);
      u8(static_cast<uint8_t>(p.kind));
      u8(static_cast<uint8_t>(p.dtype));
      u8(p.is_output ? 1 : 0);
    }
    stmt(f.body);
    for (const Expr& e : f.grid) expr(e);
    for (const Expr& e : f.block) expr(e);
    i64(f.shared_bytes);
  }

 private:
  std::string& out_;
};

constexpr uint8_t kNumExprKinds = 0
#define FLOW_X(name) +1
    FLOW_FOR_EACH_EXPR(FLOW_X)
#undef FLOW_X
    ;
constexpr uint8_t kNumStmtKinds = 0
#define FLOW_X(name) +1
    FLOW_FOR_EACH_STMT(FLOW_X)
#undef FLOW_X
    ;
constexpr uint8_t kNumIntrinsics = 0
#define FLOW_X(name) +1
    FLOW_FOR_EACH_INTRINSIC(FLOW_X)
#undef FLOW_X
    ;

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("deserialize_func: " + what + " at byte " + std::to_string(pos_));
  }
  void need(size_t n) const {
    if (in_.size() - pos_ < n) fail("truncated input");
  }
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(in_[pos_++]);
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(u8()) << (8 * i);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(u8()) << (8 * i);
    return v;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  double f64() {
    const uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string str() {
    const uint32_t n = u32();
    need(n);
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint8_t enum_u8(uint8_t count, const char* what) {
    const uint8_t v = u8();
    if (v >= count) fail(std::string("invalid ") + what + " " + std::to_string(v));
    return v;
  }
  DType dtype() { return static_cast<DType>(enum_u8(7, "dtype")); }
  uint32_t count() {  // an element count; each element takes at least one byte
    const uint32_t n = u32();
    need(n);
    return n;
  }

  Expr expr() {
    const uint8_t tag = u8();
    if (tag == 0) return Expr();
    if (tag > kNumExprKinds) fail("invalid expression tag " + std::to_string(tag));
    Depth d(*this);
    const auto kind = static_cast<ExprKind>(tag - 1);
    const DType t = dtype();
    switch (kind) {
      case ExprKind::IntImm:
        return node<IntImm>(t, i64());
      case ExprKind::FloatImm:
        return node<FloatImm>(t, f64());
      case ExprKind::Var:
        return node<Var>(t, str());
      case ExprKind::Cast:
        return node<Cast>(t, operand());
      case ExprKind::Reinterpret:
        return node<Reinterpret>(t, operand());
#define FLOW_X(name)            \
  case ExprKind::name: {        \
    Expr a = operand();         \
    Expr b = operand();         \
    return node<name>(t, a, b); \
  }
        FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X
      case ExprKind::Not:
        return node<Not>(operand());
      case ExprKind::Select: {
        Expr c = operand();
        Expr tv = operand();
        Expr fv = operand();
        return node<Select>(c, tv, fv);
      }
      case ExprKind::Load: {
        std::string buf = str();
        return node<Load>(t, buf, operand());
      }
      case ExprKind::Call: {
        const auto f = static_cast<Intrinsic>(enum_u8(kNumIntrinsics, "intrinsic"));
        const uint32_t n = count();
        std::vector<Expr> args;
        args.reserve(n);
        for (uint32_t i = 0; i < n; ++i) args.push_back(operand());
        return node<Call>(t, f, std::move(args));
      }
    }
    fail("unreachable expression kind");
  }

  Stmt stmt() {
    const uint8_t tag = u8();
    if (tag == 0) return Stmt();
    if (tag > kNumStmtKinds) fail("invalid statement tag " + std::to_string(tag));
    Depth d(*this);
    switch (static_cast<StmtKind>(tag - 1)) {
      case StmtKind::For: {
        std::string v = str();
        Expr mn = operand();
        Expr ext = operand();
        const auto k = static_cast<ForKind>(enum_u8(6, "for kind"));
        const int axis = enum_u8(3, "axis");
        return snode<For>(v, mn, ext, k, axis, body());
      }
      case StmtKind::Store: {
        std::string buf = str();
        Expr i = operand();
        return snode<Store>(buf, i, operand());
      }
      case StmtKind::LetStmt: {
        std::string n = str();
        Expr v = operand();
        return snode<LetStmt>(n, v, body());
      }
      case StmtKind::IfThenElse: {
        Expr c = operand();
        Stmt t = body();
        return snode<IfThenElse>(c, t, stmt());
      }
      case StmtKind::Allocate: {
        std::string n = str();
        const DType t = dtype();
        const int64_t size = i64();
        const auto scope = static_cast<MemoryScope>(enum_u8(2, "memory scope"));
        return snode<Allocate>(n, t, size, scope, body());
      }
      case StmtKind::Barrier:
        return snode<Barrier>();
      case StmtKind::BlockReduce: {
        const auto op = static_cast<ReduceOp>(enum_u8(4, "reduce op"));
        std::string buf = str();
        return snode<BlockReduce>(op, buf, dtype());
      }
      case StmtKind::Block: {
        const uint32_t n = count();
        std::vector<Stmt> stmts;
        stmts.reserve(n);
        for (uint32_t i = 0; i < n; ++i) stmts.push_back(body());
        return snode<Block>(std::move(stmts));
      }
    }
    fail("unreachable statement kind");
  }

  LoweredFunc func() {
    need(sizeof kMagic);
    if (std::memcmp(in_.data(), kMagic, sizeof kMagic) != 0) fail("bad magic");
    pos_ += sizeof kMagic;
    const uint32_t version = u32();
    if (version != kSerializeFormat) fail("unsupported format version " + std::to_string(version));
    LoweredFunc f;
    f.name = str();
    f.target = static_cast<Target>(enum_u8(2, "target"));
    const uint32_t n = count();
    f.params.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      Param p;
      p.name = str();
      p.kind = static_cast<ParamKind>(enum_u8(2, "param kind"));
      p.dtype = dtype();
      p.is_output = enum_u8(2, "output flag") != 0;
      f.params.push_back(std::move(p));
    }
    f.body = stmt();
    for (Expr& e : f.grid) e = expr();
    for (Expr& e : f.block) e = expr();
    f.shared_bytes = i64();
    if (pos_ != in_.size()) fail("trailing bytes");
    return f;
  }

 private:
  struct Depth {
    explicit Depth(Reader& r) : r_(r) {
      if (++r_.depth_ > kMaxDepth) r_.fail("nesting too deep");
    }
    ~Depth() { --r_.depth_; }
    Reader& r_;
  };

  Expr operand() {
    Expr e = expr();
    if (!e.defined()) fail("missing operand");
    return e;
  }
  Stmt body() {
    Stmt s = stmt();
    if (!s.defined()) fail("missing statement");
    return s;
  }
  template <class T, class... Args>
  static Expr node(Args&&... args) {
    return Expr(std::make_shared<const T>(std::forward<Args>(args)...));
  }
  template <class T, class... Args>
  static Stmt snode(Args&&... args) {
    return Stmt(std::make_shared<const T>(std::forward<Args>(args)...));
  }

  const std::string& in_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

void serialize(const Expr& e, std::string& out) {
  Writer(out).expr(e);
}
void serialize(const Stmt& s, std::string& out) {
  Writer(out).stmt(s);
}
void serialize(const LoweredFunc& f, std::string& out) {
  Writer(out).func(f);
}

LoweredFunc deserialize_func(const std::string& bytes) {
  return Reader(bytes).func();
}

std::string Hash128::hex() const {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[static_cast<size_t>(i)] = kDigits[(hi >> (60 - 4 * i)) & 0xF];
    s[static_cast<size_t>(16 + i)] = kDigits[(lo >> (60 - 4 * i)) & 0xF];
  }
  return s;
}

Hash128 xxh3_128(const std::string& bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  Hash128 r;
  r.lo = h.low64;
  r.hi = h.high64;
  return r;
}

}  // namespace flow::dsl

// Note: the loop-level IR, the output of the schedulers and the input of every code generator and
// of the reference interpreter. Like expressions, statements are immutable shared nodes generated
// from one X-macro list.
//
// Memory model: a kernel's buffers are named (LoweredFunc::params); an Allocate introduces a local
// or shared scratch buffer visible in its body. Loads and Stores index in elements. Mutable scalar
// state (a reduction accumulator) is an Allocate of size 1 in Local scope.
//
// GPU: For loops of kind GPUBlock/GPUThread bind an axis (0=x, 1=y, 2=z) and start at 0. Barrier
// and BlockReduce are collective: every thread of the block reaches them (they may appear only
// directly in the body of the innermost GPUThread loop's Block, not under an If or serial loop whose
// trip count differs between threads). BlockReduce combines element 0 of a Local buffer across the
// threads of the block and leaves the result in that element of every thread.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dsl/expr.h"

namespace flow::dsl {

#define FLOW_FOR_EACH_STMT(X) \
  X(For)                      \
  X(Store)                    \
  X(LetStmt)                  \
  X(IfThenElse)               \
  X(Allocate)                 \
  X(Barrier)                  \
  X(BlockReduce)              \
  X(Block)

enum class StmtKind : uint8_t {
#define FLOW_X(name) name,
  FLOW_FOR_EACH_STMT(FLOW_X)
#undef FLOW_X
};
const char* stmt_kind_name(StmtKind k);

struct StmtNode {
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> n) : node_(std::move(n)) {}
  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  StmtKind kind() const { return node_->kind; }
  bool same_as(const Stmt& o) const { return node_ == o.node_; }
  template <class T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

enum class ForKind : uint8_t {
  Serial,
  Parallel,    // iterations spread over the CPU thread pool
  Vectorized,  // constant extent; iterations run as SIMD lanes / one vector memory access
  Unrolled,    // constant extent
  GPUBlock,    // blockIdx.{x,y,z}
  GPUThread,   // threadIdx.{x,y,z}
};
const char* for_kind_name(ForKind k);

struct For : StmtNode {
  static constexpr StmtKind kKind = StmtKind::For;
  For(std::string v, Expr mn, Expr ext, ForKind k, int ax, Stmt b)
      : StmtNode(kKind), var(std::move(v)), min(std::move(mn)), extent(std::move(ext)), kind(k), axis(ax),
        body(std::move(b)) {}
  const std::string var;  // an Int64 Var
  const Expr min, extent;
  const ForKind kind;
  const int axis;  // GPU loops: 0, 1, 2 for x, y, z; otherwise 0
  const Stmt body;
};

struct Store : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Store;
  Store(std::string buf, Expr i, Expr v)
      : StmtNode(kKind), buffer(std::move(buf)), index(std::move(i)), value(std::move(v)) {}
  const std::string buffer;
  const Expr index;
  const Expr value;  // of the buffer's dtype
};

struct LetStmt : StmtNode {
  static constexpr StmtKind kKind = StmtKind::LetStmt;
  LetStmt(std::string n, Expr v, Stmt b) : StmtNode(kKind), name(std::move(n)), value(std::move(v)), body(std::move(b)) {}
  const std::string name;  // bound as Var(value.type(), name) in body
  const Expr value;
  const Stmt body;
};

struct IfThenElse : StmtNode {
  static constexpr StmtKind kKind = StmtKind::IfThenElse;
  IfThenElse(Expr c, Stmt t, Stmt e)
      : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  const Expr cond;
  const Stmt then_case;
  const Stmt else_case;  // may be undefined
};

enum class MemoryScope : uint8_t { Local, Shared };

struct Allocate : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Allocate;
  Allocate(std::string n, DType t, int64_t sz, MemoryScope s, Stmt b)
      : StmtNode(kKind), name(std::move(n)), dtype(t), size(sz), scope(s), body(std::move(b)) {}
  const std::string name;
  const DType dtype;
  const int64_t size;  // elements, a compile-time constant
  const MemoryScope scope;
  const Stmt body;
};

struct Barrier : StmtNode {  // __syncthreads()
  static constexpr StmtKind kKind = StmtKind::Barrier;
  Barrier() : StmtNode(kKind) {}
};

enum class ReduceOp : uint8_t { Sum, Max, Min, Prod };
const char* reduce_op_name(ReduceOp op);
Expr reduce_identity(ReduceOp op, DType t);    // 0, -inf / lowest, +inf / highest, 1
Expr reduce_combine(ReduceOp op, Expr a, Expr b);  // NaN-propagating for Max/Min, as torch

struct BlockReduce : StmtNode {
  static constexpr StmtKind kKind = StmtKind::BlockReduce;
  BlockReduce(ReduceOp o, std::string b, DType t) : StmtNode(kKind), op(o), buffer(std::move(b)), dtype(t) {}
  const ReduceOp op;
  const std::string buffer;  // a Local Allocate of size >= 1; element 0 is combined
  const DType dtype;
};

struct Block : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Block;
  explicit Block(std::vector<Stmt> s) : StmtNode(kKind), stmts(std::move(s)) {}
  const std::vector<Stmt> stmts;
};

// ---- builders ----
Stmt make_for(const std::string& var, Expr min, Expr extent, ForKind kind, Stmt body, int axis = 0);
Stmt make_store(const std::string& buffer, Expr index, Expr value);
Stmt make_let(const std::string& name, Expr value, Stmt body);
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = Stmt());
Stmt make_allocate(const std::string& name, DType t, int64_t size, MemoryScope scope, Stmt body);
Stmt make_barrier();
Stmt make_block_reduce(ReduceOp op, const std::string& buffer, DType t);
Stmt make_block(std::vector<Stmt> stmts);  // flattens nested blocks, drops undefined

// ---- a compiled unit ----
enum class ParamKind : uint8_t { Buffer, Scalar };
struct Param {
  std::string name;
  ParamKind kind;
  DType dtype;  // element type for buffers; Int64 (or a float type) for scalars
  bool is_output = false;
};

// How a caller passes one parameter to a compiled (or interpreted) kernel: a buffer's data pointer
// or a scalar's value, in the order of LoweredFunc::params. This is the CPU kernel ABI too:
// `extern "C" void kernel(const flow::dsl::ArgValue* args)`.
union ArgValue {
  void* ptr;
  int64_t i64;
  double f64;
};

enum class Target : uint8_t { CPU, CUDA };
const char* target_name(Target t);

// One kernel: a loop nest over named parameters. For CUDA kernels `grid` and `block` give the
// launch shape as expressions over the scalar params (x, y, z); the body's GPUBlock/GPUThread
// loops have exactly those extents.
struct LoweredFunc {
  std::string name;
  Target target = Target::CPU;
  std::vector<Param> params;
  Stmt body;
  Expr grid[3];
  Expr block[3];
  int64_t shared_bytes = 0;  // static shared memory the body allocates
};

}  // namespace flow::dsl

// Note: the statement/expression lowering (see codegen_ir.h for the module layout). Choices:
//  - Serial loops are emitted in rotated canonical form (guard, phi induction from min to
//    min + extent with the bound computed once before the loop) so LLVM's loop vectorizer widens
//    them. Innermost loops that store to no Local allocation and call no libm function (float64
//    transcendentals, pow, fmod: these stay scalar calls) carry llvm.loop.vectorize.enable.
//  - Vectorized loops with a constant extent W (<= 64) whose lanes are independent (see
//    vectorizable_loop) are emitted as explicit W-lane vector code: the loop variable is <min, min+1, ...>, every value
//    that depends on it is a <W x T> vector, a load/store whose index is `uniform + lane` is one
//    vector access, a load whose lanes lie at compile-time-known distances (jit/llvm/lane_form.h: interleaved
//    RGB bytes, a reversed dim) one load of the span they cover and a shuffle, any other lane-varying index a per-lane
//    gather/scatter. Otherwise (or for a
//    body with control flow) they are fully unrolled, as Unrolled loops are.
//  - And/Or and Select evaluate only the chosen side (branches) when that side loads from a caller
//    buffer at an index the statement does not load anyway (as the interpreter does, so
//    `select(j < n, x[j], 0)` never reads x[j] out of range); otherwise they are branch-free.
//    Inside an explicit vector loop the branching case falls back to unrolling.
//  - Float Min/Max propagate NaN and order -0 < +0 (interpreter semantics), branch-free.
//  - Integer Div/Mod: truncating; by zero gives 0; INT_MIN / -1 wraps, INT_MIN % -1 is 0.
//  - Local Allocate: an alloca in the function's entry block (SROA/mem2reg promote it).
#include "jit/llvm/codegen_ir.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PatternMatch.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/ir_visitor.h"
#include "jit/llvm/convert_ir.h"
#include "jit/llvm/lane_form.h"
#include "jit/llvm/math_ir.h"

namespace flow::jit::llvm_backend::ir {
namespace {

using dsl::DType;
using dsl::ExprKind;
using dsl::StmtKind;
using llvm::Type;
using llvm::Value;

[[noreturn]] void fail(const std::string& msg) {
  throw std::runtime_error("llvm backend: " + msg);
}

constexpr int64_t kNotAffine = std::numeric_limits<int64_t>::min();
// Vector loads whose lanes lie at known distances within a span of at most 4 elements per lane
// load the whole span and shuffle; wider spans gather lane by lane (the span would waste most of
// what it reads).
constexpr int64_t kMaxShuffleStride = 4;
constexpr int64_t kMaxVectorWidth = 64;
constexpr int64_t kMaxUnroll = 1024;
// The captured name of the error word index checks report into (not a valid IR buffer name).
constexpr const char* kErrorWord = "flow.err";

// ---- IR inspection helpers -------------------------------------------------------------------

void for_each_child(const dsl::Expr& e, const std::function<void(const dsl::Expr&)>& fn) {
  switch (e.kind()) {
    case ExprKind::IntImm:
    case ExprKind::FloatImm:
    case ExprKind::Var:
      return;
    case ExprKind::Cast:
      fn(e.as<dsl::Cast>()->value);
      return;
    case ExprKind::Reinterpret:
      fn(e.as<dsl::Reinterpret>()->value);
      return;
#define FLOW_X(name) case ExprKind::name:
      FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X
      {
        const auto* op = static_cast<const dsl::BinaryNode*>(e.get());
        fn(op->a);
        fn(op->b);
        return;
      }
    case ExprKind::Not:
      fn(e.as<dsl::Not>()->a);
      return;
    case ExprKind::Select: {
      const auto* op = e.as<dsl::Select>();
      fn(op->cond);
      fn(op->true_value);
      fn(op->false_value);
      return;
    }
    case ExprKind::Load:
      fn(e.as<dsl::Load>()->index);
      return;
    case ExprKind::Call:
      for (const dsl::Expr& a : e.as<dsl::Call>()->args) fn(a);
      return;
  }
}

// Loads that evaluating `e` always performs (not under a Select arm or the right side of And/Or).
void unconditional_loads(const dsl::Expr& e, std::vector<dsl::Expr>& out) {
  if (e.kind() == ExprKind::Load) out.push_back(e);
  if (const auto* s = e.as<dsl::Select>()) return unconditional_loads(s->cond, out);
  if (e.kind() == ExprKind::And || e.kind() == ExprKind::Or) {
    return unconditional_loads(static_cast<const dsl::BinaryNode*>(e.get())->a, out);
  }
  for_each_child(e, [&](const dsl::Expr& c) { unconditional_loads(c, out); });
}

void for_each_substmt(const dsl::Stmt& s, const std::function<void(const dsl::Stmt&)>& fn) {
  switch (s.kind()) {
    case StmtKind::For:
      fn(s.as<dsl::For>()->body);
      return;
    case StmtKind::LetStmt:
      fn(s.as<dsl::LetStmt>()->body);
      return;
    case StmtKind::IfThenElse: {
      const auto* op = s.as<dsl::IfThenElse>();
      fn(op->then_case);
      if (op->else_case.defined()) fn(op->else_case);
      return;
    }
    case StmtKind::Allocate:
      fn(s.as<dsl::Allocate>()->body);
      return;
    case StmtKind::Block:
      for (const dsl::Stmt& c : s.as<dsl::Block>()->stmts) fn(c);
      return;
    case StmtKind::Store:
    case StmtKind::Barrier:
    case StmtKind::BlockReduce:
      return;
  }
}

bool contains_for(const dsl::Stmt& s) {
  if (s.kind() == StmtKind::For) return true;
  bool found = false;
  for_each_substmt(s, [&](const dsl::Stmt& c) { found = found || contains_for(c); });
  return found;
}

// Stores in `s` to a buffer in `local` or allocated inside `s`.
bool stores_local(const dsl::Stmt& s, std::set<std::string> local) {
  if (const auto* a = s.as<dsl::Allocate>()) local.insert(a->name);
  if (const auto* st = s.as<dsl::Store>()) return local.count(st->buffer) > 0;
  bool found = false;
  for_each_substmt(s, [&](const dsl::Stmt& c) { found = found || stores_local(c, local); });
  return found;
}

std::optional<int64_t> const_int(const dsl::Expr& e) {
  if (const int64_t* v = dsl::as_const_int(e)) return *v;
  return std::nullopt;
}

// `elem` with the shape (scalar or vector) of `like`.
Type* with_scalar(Type* like, Type* elem) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
}

// Calls that stay scalar library calls (so forcing vectorization of their loop only warns).
bool calls_libm(const dsl::Expr& e) {
  if (const auto* c = e.as<dsl::Call>()) {
    const bool transcendental = c->func == dsl::Intrinsic::Exp || c->func == dsl::Intrinsic::Log ||
                                c->func == dsl::Intrinsic::Tanh || c->func == dsl::Intrinsic::Erf;
    if (c->func == dsl::Intrinsic::Pow || (transcendental && c->args[0].type() == DType::Float64)) return true;
  }
  if (e.kind() == ExprKind::Mod && dsl::is_floating(e.type())) return true;  // fmod
  bool found = false;
  for_each_child(e, [&](const dsl::Expr& c) { found = found || calls_libm(c); });
  return found;
}

bool stmt_calls_libm(const dsl::Stmt& s) {
  bool found = false;
  auto check = [&](const dsl::Expr& e) { found = found || (e.defined() && calls_libm(e)); };
  if (const auto* st = s.as<dsl::Store>()) {
    check(st->index);
    check(st->value);
  } else if (const auto* l = s.as<dsl::LetStmt>()) {
    check(l->value);
  } else if (const auto* i = s.as<dsl::IfThenElse>()) {
    check(i->cond);
  } else if (const auto* f = s.as<dsl::For>()) {
    check(f->min);
    check(f->extent);
  }
  for_each_substmt(s, [&](const dsl::Stmt& c) { found = found || stmt_calls_libm(c); });
  return found;
}

[[noreturn]] void cuda_only(const char* what) {
  fail(std::string("CUDA-only statement in a CPU kernel (") + what + ")");
}

// ---- the code generator ----------------------------------------------------------------------

struct BufInfo {
  Value* ptr;  // element pointer (storage type)
  DType dtype;
  bool local;
};

struct Capture {
  std::string name;
  bool is_buffer;
  BufInfo buf;   // buffers
  Value* value;  // scalars
};

// Restores a map entry on scope exit.
template <class Map>
class ScopedBinding {
 public:
  ScopedBinding(Map& m, const std::string& key, typename Map::mapped_type v) : m_(m), key_(key) {
    auto it = m_.find(key);
    if (it != m_.end()) old_ = it->second;
    m_.insert_or_assign(key, std::move(v));
  }
  ~ScopedBinding() {
    if (old_) {
      m_.insert_or_assign(key_, *old_);
    } else {
      m_.erase(key_);
    }
  }
  ScopedBinding(const ScopedBinding&) = delete;
  ScopedBinding& operator=(const ScopedBinding&) = delete;

 private:
  Map& m_;
  std::string key_;
  std::optional<typename Map::mapped_type> old_;
};

class Codegen {
 public:
  Codegen(const dsl::LoweredFunc& f, llvm::LLVMContext& ctx, llvm::Module& m, const CodegenOptions& opt)
      : f_(f), ctx_(ctx), mod_(m), opt_(opt), b_(ctx) {}

  void run();

 private:
  using VarMap = std::map<std::string, Value*>;
  using BufMap = std::map<std::string, BufInfo>;
  using RegionBody = std::function<void(const std::vector<Value*>& extra)>;

  llvm::Function* new_function(const std::string& name, llvm::FunctionType* ty, bool internal);
  llvm::Function* emit_region(const std::string& name, const std::vector<Capture>& caps, int n_extra,
                              const RegionBody& body);
  std::vector<Capture> captures_in_scope() const;

  void emit(const dsl::Stmt& s);
  void emit_for(const dsl::For* op);
  void emit_serial(const dsl::For* op);
  void emit_unrolled(const dsl::For* op, int64_t extent);
  void emit_vector(const dsl::For* op, int64_t width);
  void emit_parallel(const dsl::For* op);
  void emit_loop(Value* lo, Value* hi, const std::function<void(Value*)>& body, bool vectorize_hint);
  void emit_store(const dsl::Store* op);
  void emit_if(const dsl::IfThenElse* op);
  void emit_allocate(const dsl::Allocate* op);

  Value* expr(const dsl::Expr& e);
  Value* emit_binary(const dsl::BinaryNode* op, ExprKind kind);
  Value* emit_short_circuit(const dsl::BinaryNode* op, bool is_and);
  Value* emit_select(const dsl::Select* op);
  Value* emit_load(const dsl::Load* op);
  Value* emit_call(const dsl::Call* op);
  Value* emit_check_index(const dsl::Call* op, Value* i);
  Value* sign_flip_keeping_nan(Value* x, Value* minus_one);
  Value* emit_integer_pow(Value* base, Value* exp);
  Value* int_div(Value* a, Value* b, bool is_mod);
  Value* float_minmax(Value* a, Value* b, bool is_max);
  Value* libm_call(const char* name, Value* x, Value* y = nullptr);  // y: a second argument

  // Guarded loads: a Select arm or And/Or right side is evaluated eagerly (branch-free) when every
  // load in it is from a Local allocation or also performed unconditionally by the same statement
  // (reduce_combine's `select(a > b || is_nan(a), a, b)` is then a plain select).
  void set_root(std::initializer_list<const dsl::Expr*> roots) {
    safe_loads_.clear();
    for (const dsl::Expr* r : roots) unconditional_loads(*r, safe_loads_);
  }
  bool speculatable(const dsl::Expr& e) const;
  bool needs_branches(const dsl::Expr& e) const;
  bool vectorizable_loop(const dsl::For* op);
  bool vectorizable(const dsl::Stmt& s, std::map<std::string, std::vector<dsl::Expr>>& stores,
                    std::map<std::string, std::vector<dsl::Expr>>& loads);

  Value* as_i64(Value* v) { return b_.CreateSExtOrTrunc(v, b_.getInt64Ty()); }
  Value* splat(Value* v) {
    return v->getType()->isVectorTy() ? v : b_.CreateVectorSplat(static_cast<unsigned>(lane_width_), v);
  }
  void unify(Value*& a, Value*& b) {
    if (a->getType()->isVectorTy() || b->getType()->isVectorTy()) {
      a = splat(a);
      b = splat(b);
    }
  }
  const BufInfo& buffer(const std::string& name) const;
  int64_t lane_stride(const dsl::Expr& e) const;
  Value* element_ptr(const BufInfo& buf, Value* index);
  llvm::MDNode* vectorize_md();

  const dsl::LoweredFunc& f_;
  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  const CodegenOptions& opt_;
  llvm::IRBuilder<> b_;

  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  VarMap vars_;
  BufMap bufs_;
  bool in_parallel_ = false;
  int parallel_count_ = 0;
  // Explicit vector loop state: the lane variable, its width, and Let-bound vars' lane strides.
  std::string lane_var_;
  int64_t lane_width_ = 0;
  std::map<std::string, int64_t> lane_strides_;
  LaneScope lanes_;  // the same loop, for lane_form (each lane's known offset)
  std::vector<dsl::Expr> safe_loads_;
};

bool Codegen::speculatable(const dsl::Expr& e) const {
  // An index check reports what it sees: evaluated only where the serial code would evaluate it.
  if (const auto* c = e.as<dsl::Call>(); c && c->func == dsl::Intrinsic::CheckIndex) return false;
  if (const auto* ld = e.as<dsl::Load>()) {
    auto it = bufs_.find(ld->buffer);
    const bool local = it != bufs_.end() && it->second.local;
    if (!local &&
        std::none_of(safe_loads_.begin(), safe_loads_.end(), [&](const dsl::Expr& s) { return dsl::equal(s, e); })) {
      return false;
    }
  }
  bool ok = true;
  for_each_child(e, [&](const dsl::Expr& c) { ok = ok && speculatable(c); });
  return ok;
}

bool Codegen::needs_branches(const dsl::Expr& e) const {
  if (const auto* s = e.as<dsl::Select>()) {
    if (!speculatable(s->true_value) || !speculatable(s->false_value)) return true;
  }
  if (e.kind() == ExprKind::And || e.kind() == ExprKind::Or) {
    if (!speculatable(static_cast<const dsl::BinaryNode*>(e.get())->b)) return true;
  }
  bool found = false;
  for_each_child(e, [&](const dsl::Expr& c) { found = found || needs_branches(c); });
  return found;
}

// Whether `op` (a Vectorized loop) can run as explicit SIMD lanes with the serial loop's meaning:
// a straight-line Let/Store/Block body without guarded loads, where every buffer the body stores to
// is accessed (loaded and stored) at one index expression that is affine in the lane with a
// non-zero stride. Then lane k touches only its own elements of written buffers, so running the
// statements lane-parallel is the same as running the iterations in order. Anything else (a
// uniform-index accumulation, a cross-lane read, control flow) is unrolled instead.
bool Codegen::vectorizable_loop(const dsl::For* op) {
  lane_var_ = op->var;
  lane_strides_.clear();
  std::map<std::string, std::vector<dsl::Expr>> stores, loads;
  bool ok = vectorizable(op->body, stores, loads);
  for (const auto& [name, idx] : stores) {
    if (!ok) break;
    auto same = [&](const dsl::Expr& e) { return dsl::equal(e, idx[0]); };
    ok = std::all_of(idx.begin(), idx.end(), same) && std::all_of(loads[name].begin(), loads[name].end(), same);
  }
  lane_var_.clear();
  lane_strides_.clear();
  return ok;
}

bool Codegen::vectorizable(const dsl::Stmt& s, std::map<std::string, std::vector<dsl::Expr>>& stores,
                           std::map<std::string, std::vector<dsl::Expr>>& loads) {
  std::function<void(const dsl::Expr&)> collect = [&](const dsl::Expr& e) {
    if (const auto* ld = e.as<dsl::Load>()) loads[ld->buffer].push_back(ld->index);
    for_each_child(e, collect);
  };
  switch (s.kind()) {
    case StmtKind::Store: {
      const auto* op = s.as<dsl::Store>();
      set_root({&op->index, &op->value});
      const int64_t stride = lane_stride(op->index);
      if (stride == 0 || stride == kNotAffine || needs_branches(op->index) || needs_branches(op->value)) return false;
      stores[op->buffer].push_back(op->index);
      collect(op->index);
      collect(op->value);
      return true;
    }
    case StmtKind::LetStmt: {
      const auto* op = s.as<dsl::LetStmt>();
      set_root({&op->value});
      if (needs_branches(op->value)) return false;
      collect(op->value);
      ScopedBinding<std::map<std::string, int64_t>> bind(lane_strides_, op->name, lane_stride(op->value));
      return vectorizable(op->body, stores, loads);
    }
    case StmtKind::Block:
      for (const dsl::Stmt& c : s.as<dsl::Block>()->stmts) {
        if (!vectorizable(c, stores, loads)) return false;
      }
      return true;
    default:
      return false;
  }
}

llvm::Function* Codegen::new_function(const std::string& name, llvm::FunctionType* ty, bool internal) {
  auto* fn = llvm::Function::Create(ty, internal ? llvm::Function::InternalLinkage : llvm::Function::ExternalLinkage,
                                    name, mod_);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  if (!opt_.cpu.empty()) fn->addFnAttr("target-cpu", opt_.cpu);
  if (!opt_.features.empty()) fn->addFnAttr("target-features", opt_.features);
  return fn;
}

void Codegen::run() {
  if (f_.name.empty()) fail("kernel has no name");
  if (f_.target != dsl::Target::CPU) fail("kernel '" + f_.name + "' targets CUDA");
  if (!f_.body.defined()) fail("kernel '" + f_.name + "' has no body");
  Type* i8p = b_.getInt8PtrTy();
  llvm::Function* kernel = new_function(f_.name, llvm::FunctionType::get(b_.getVoidTy(), {i8p}, false), false);
  llvm::Argument* args = kernel->getArg(0);
  args->setName("args");
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", kernel));
  // Unpack the ArgValue array: pointers, i64 or f64 slots.
  std::vector<Capture> caps;
  std::set<std::string> names;
  for (size_t i = 0; i < f_.params.size(); ++i) {
    const dsl::Param& p = f_.params[i];
    if (!names.insert(p.name).second) fail("duplicate param '" + p.name + "' in kernel '" + f_.name + "'");
    Value* slot =
        b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), b_.CreateBitCast(args, b_.getInt64Ty()->getPointerTo()), i);
    if (p.kind == dsl::ParamKind::Buffer) {
      Type* st = storage_type(ctx_, p.dtype);
      Value* raw = b_.CreateAlignedLoad(i8p, b_.CreateBitCast(slot, i8p->getPointerTo()), llvm::Align(8), p.name);
      caps.push_back({p.name, true, {b_.CreateBitCast(raw, st->getPointerTo()), p.dtype, false}, nullptr});
    } else if (dsl::is_floating(p.dtype)) {
      Value* d = b_.CreateAlignedLoad(b_.getDoubleTy(), b_.CreateBitCast(slot, b_.getDoubleTy()->getPointerTo()),
                                      llvm::Align(8), p.name);
      caps.push_back({p.name, false, {}, cast_value(b_, d, DType::Float64, p.dtype)});
    } else {
      Value* x = b_.CreateAlignedLoad(b_.getInt64Ty(), slot, llvm::Align(8), p.name);
      caps.push_back({p.name, false, {}, cast_value(b_, x, DType::Int64, p.dtype)});
    }
  }
  if (dsl::calls_intrinsic(f_.body, dsl::Intrinsic::CheckIndex)) {
    // The error word the index checks report into: one slot after the params (jit::launch_cpu).
    Value* slot = b_.CreateConstInBoundsGEP1_64(
        b_.getInt64Ty(), b_.CreateBitCast(args, b_.getInt64Ty()->getPointerTo()), f_.params.size());
    Value* raw = b_.CreateAlignedLoad(i8p, b_.CreateBitCast(slot, i8p->getPointerTo()), llvm::Align(8), kErrorWord);
    caps.push_back(
        {kErrorWord, true, {b_.CreateBitCast(raw, b_.getInt64Ty()->getPointerTo()), DType::Int64, false}, nullptr});
  }
  llvm::BasicBlock* kernel_block = b_.GetInsertBlock();
  llvm::Function* body = emit_region(f_.name + ".body", caps, 0, [&](const std::vector<Value*>&) { emit(f_.body); });
  b_.SetInsertPoint(kernel_block);
  std::vector<Value*> call_args;
  for (const Capture& c : caps) call_args.push_back(c.is_buffer ? c.buf.ptr : c.value);
  b_.CreateCall(body, call_args);
  b_.CreateRetVoid();
}

llvm::Function* Codegen::emit_region(const std::string& name, const std::vector<Capture>& caps, int n_extra,
                                     const RegionBody& body) {
  std::vector<Type*> types;
  for (const Capture& c : caps) types.push_back(c.is_buffer ? c.buf.ptr->getType() : c.value->getType());
  for (int i = 0; i < n_extra; ++i) types.push_back(b_.getInt64Ty());
  llvm::Function* fn = new_function(name, llvm::FunctionType::get(b_.getVoidTy(), types, false), true);
  // Save the enclosing function's state.
  llvm::Function* saved_fn = fn_;
  llvm::BasicBlock* saved_entry = entry_;
  const auto saved_ip = b_.saveIP();
  VarMap saved_vars = std::move(vars_);
  BufMap saved_bufs = std::move(bufs_);
  const bool saved_parallel = in_parallel_;
  vars_.clear();
  bufs_.clear();

  fn_ = fn;
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn);
  b_.SetInsertPoint(entry_);
  for (size_t i = 0; i < caps.size(); ++i) {
    llvm::Argument* a = fn->getArg(static_cast<unsigned>(i));
    a->setName(caps[i].name);
    if (caps[i].is_buffer) {
      if (opt_.noalias_buffers && !caps[i].buf.local)
        fn->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
      bufs_[caps[i].name] = {a, caps[i].buf.dtype, caps[i].buf.local};
    } else {
      vars_[caps[i].name] = a;
    }
  }
  std::vector<Value*> extra;
  for (int i = 0; i < n_extra; ++i) extra.push_back(fn->getArg(static_cast<unsigned>(caps.size() + i)));
  body(extra);
  b_.CreateRetVoid();

  fn_ = saved_fn;
  entry_ = saved_entry;
  b_.restoreIP(saved_ip);
  vars_ = std::move(saved_vars);
  bufs_ = std::move(saved_bufs);
  in_parallel_ = saved_parallel;
  return fn;
}

std::vector<Capture> Codegen::captures_in_scope() const {
  std::vector<Capture> caps;
  for (const auto& [name, buf] : bufs_) caps.push_back({name, true, buf, nullptr});
  for (const auto& [name, v] : vars_) caps.push_back({name, false, {}, v});
  return caps;
}

const BufInfo& Codegen::buffer(const std::string& name) const {
  auto it = bufs_.find(name);
  if (it == bufs_.end()) fail("unknown buffer '" + name + "' in kernel '" + f_.name + "'");
  return it->second;
}

llvm::MDNode* Codegen::vectorize_md() {
  llvm::Metadata* enable[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                              llvm::ConstantAsMetadata::get(b_.getTrue())};
  llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(ctx_, enable)};
  llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
  md->replaceOperandWith(0, md);
  return md;
}

// ---- statements ------------------------------------------------------------------------------

void Codegen::emit(const dsl::Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::For:
      emit_for(s.as<dsl::For>());
      return;
    case StmtKind::Store:
      emit_store(s.as<dsl::Store>());
      return;
    case StmtKind::LetStmt: {
      const auto* op = s.as<dsl::LetStmt>();
      set_root({&op->value});
      Value* v = expr(op->value);
      v->setName(op->name);
      std::optional<ScopedBinding<std::map<std::string, int64_t>>> stride;
      std::optional<ScopedBinding<std::map<std::string, std::optional<LaneForm>>>> form;
      if (lane_width_ > 0) {
        stride.emplace(lane_strides_, op->name, lane_stride(op->value));
        form.emplace(lanes_.lets, op->name, lane_form(op->value, lanes_));
      }
      ScopedBinding<VarMap> bind(vars_, op->name, v);
      emit(op->body);
      return;
    }
    case StmtKind::IfThenElse:
      emit_if(s.as<dsl::IfThenElse>());
      return;
    case StmtKind::Allocate:
      emit_allocate(s.as<dsl::Allocate>());
      return;
    case StmtKind::Barrier:
      cuda_only("barrier");
    case StmtKind::BlockReduce:
      cuda_only("block_reduce");
    case StmtKind::Block:
      for (const dsl::Stmt& c : s.as<dsl::Block>()->stmts) emit(c);
      return;
  }
}

void Codegen::emit_for(const dsl::For* op) {
  const std::optional<int64_t> extent = const_int(op->extent);
  switch (op->kind) {
    case dsl::ForKind::GPUBlock:
      cuda_only("gpu_block loop");
    case dsl::ForKind::GPUThread:
      cuda_only("gpu_thread loop");
    case dsl::ForKind::Parallel:
      if (!in_parallel_ && lane_width_ == 0) return emit_parallel(op);
      return emit_serial(op);  // nested parallelism runs serially
    case dsl::ForKind::Vectorized:
      if (extent && *extent > 1 && *extent <= kMaxVectorWidth && lane_width_ == 0 && vectorizable_loop(op)) {
        return emit_vector(op, *extent);
      }
      if (extent && *extent <= kMaxUnroll) return emit_unrolled(op, *extent);
      return emit_serial(op);
    case dsl::ForKind::Unrolled:
      if (extent && *extent <= kMaxUnroll) return emit_unrolled(op, *extent);
      return emit_serial(op);
    case dsl::ForKind::Serial:
      return emit_serial(op);
  }
}

void Codegen::emit_loop(Value* lo, Value* hi, const std::function<void(Value*)>& body, bool vectorize_hint) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(ctx_, "loop", fn_);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "loop.end");
  b_.CreateCondBr(b_.CreateICmpSLT(lo, hi), loop, exit);
  b_.SetInsertPoint(loop);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
  i->addIncoming(lo, pre);
  body(i);
  Value* next = b_.CreateAdd(i, b_.getInt64(1), "", false, true);
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  llvm::BranchInst* br = b_.CreateCondBr(b_.CreateICmpSLT(next, hi), loop, exit);
  if (vectorize_hint) br->setMetadata(llvm::LLVMContext::MD_loop, vectorize_md());
  i->addIncoming(next, latch);
  exit->insertInto(fn_);
  b_.SetInsertPoint(exit);
}

bool innermost_without_local_stores(const dsl::For* op, const std::map<std::string, BufInfo>& bufs) {
  if (contains_for(op->body) || stmt_calls_libm(op->body)) return false;
  std::set<std::string> local;
  for (const auto& [name, buf] : bufs) {
    if (buf.local) local.insert(name);
  }
  return !stores_local(op->body, local);
}

void Codegen::emit_serial(const dsl::For* op) {
  set_root({&op->min, &op->extent});
  Value* lo = as_i64(expr(op->min));
  Value* hi = b_.CreateAdd(lo, as_i64(expr(op->extent)));
  emit_loop(
      lo, hi,
      [&](Value* i) {
        i->setName(op->var);
        ScopedBinding<VarMap> bind(vars_, op->var, i);
        emit(op->body);
      },
      innermost_without_local_stores(op, bufs_));
}

void Codegen::emit_unrolled(const dsl::For* op, int64_t extent) {
  set_root({&op->min});
  Value* lo = as_i64(expr(op->min));
  for (int64_t k = 0; k < extent; ++k) {
    ScopedBinding<VarMap> bind(vars_, op->var, b_.CreateAdd(lo, b_.getInt64(static_cast<uint64_t>(k))));
    emit(op->body);
  }
}

void Codegen::emit_vector(const dsl::For* op, int64_t width) {
  set_root({&op->min});
  Value* lo = as_i64(expr(op->min));
  std::vector<llvm::Constant*> steps;
  for (int64_t k = 0; k < width; ++k) steps.push_back(b_.getInt64(static_cast<uint64_t>(k)));
  lane_width_ = width;
  lane_var_ = op->var;
  lanes_ = LaneScope{op->var, const_int(op->min), width, {}};
  Value* lanes = b_.CreateAdd(splat(lo), llvm::ConstantVector::get(steps), op->var);
  {
    ScopedBinding<VarMap> bind(vars_, op->var, lanes);
    emit(op->body);
  }
  lane_width_ = 0;
  lane_var_.clear();
  lane_strides_.clear();
  lanes_ = LaneScope{};
}

void Codegen::emit_parallel(const dsl::For* op) {
  set_root({&op->min, &op->extent});
  Value* lo = as_i64(expr(op->min));
  Value* extent = as_i64(expr(op->extent));
  const std::vector<Capture> caps = captures_in_scope();
  const std::string name = f_.name + ".par" + std::to_string(parallel_count_++);
  const bool hint = innermost_without_local_stores(op, bufs_);
  llvm::Function* inner = emit_region(name, caps, 3, [&](const std::vector<Value*>& extra) {
    in_parallel_ = true;
    extra[0]->setName("min");
    extra[1]->setName("begin");
    extra[2]->setName("end");
    emit_loop(
        extra[1], extra[2],
        [&](Value* i) {
          Value* v = b_.CreateAdd(extra[0], i, op->var, false, true);
          ScopedBinding<VarMap> bind(vars_, op->var, v);
          emit(op->body);
        },
        hint);
  });
  // The ctx struct: every captured value, then the loop's min.
  std::vector<Type*> fields;
  for (const Capture& c : caps) fields.push_back(c.is_buffer ? c.buf.ptr->getType() : c.value->getType());
  fields.push_back(b_.getInt64Ty());
  llvm::StructType* ctx_ty = llvm::StructType::create(ctx_, fields, name + ".ctx");
  // The thunk flow_parallel_for calls: unpack ctx, call the region.
  Type* i8p = b_.getInt8PtrTy();
  llvm::FunctionType* thunk_ty =
      llvm::FunctionType::get(b_.getVoidTy(), {i8p, b_.getInt64Ty(), b_.getInt64Ty()}, false);
  llvm::Function* thunk = new_function(name + ".thunk", thunk_ty, true);
  {
    llvm::IRBuilder<> tb(llvm::BasicBlock::Create(ctx_, "entry", thunk));
    Value* cp = tb.CreateBitCast(thunk->getArg(0), ctx_ty->getPointerTo());
    std::vector<Value*> args;
    for (unsigned k = 0; k < fields.size(); ++k) {
      args.push_back(tb.CreateLoad(fields[k], tb.CreateStructGEP(ctx_ty, cp, k)));
    }
    args.push_back(thunk->getArg(1));
    args.push_back(thunk->getArg(2));
    tb.CreateCall(inner, args);
    tb.CreateRetVoid();
  }
  // Fill ctx (allocated in the entry block) and call the pool when there is work.
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  llvm::AllocaInst* ctx = eb.CreateAlloca(ctx_ty, nullptr, name + ".ctx");
  for (unsigned k = 0; k < caps.size(); ++k) {
    b_.CreateStore(caps[k].is_buffer ? caps[k].buf.ptr : caps[k].value, b_.CreateStructGEP(ctx_ty, ctx, k));
  }
  b_.CreateStore(lo, b_.CreateStructGEP(ctx_ty, ctx, static_cast<unsigned>(caps.size())));
  llvm::FunctionCallee pfor = mod_.getOrInsertFunction(
      "flow_parallel_for",
      llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt64Ty(), thunk_ty->getPointerTo(), i8p}, false));
  if (auto* decl = llvm::dyn_cast<llvm::Function>(pfor.getCallee())) decl->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::BasicBlock* run = llvm::BasicBlock::Create(ctx_, name + ".run", fn_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, name + ".done", fn_);
  b_.CreateCondBr(b_.CreateICmpSGT(extent, b_.getInt64(0)), run, done);
  b_.SetInsertPoint(run);
  b_.CreateCall(pfor, {extent, thunk, b_.CreateBitCast(ctx, i8p)});
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

Value* Codegen::element_ptr(const BufInfo& buf, Value* index) {
  return b_.CreateInBoundsGEP(storage_type(ctx_, buf.dtype), buf.ptr, index);
}

void Codegen::emit_store(const dsl::Store* op) {
  const BufInfo& buf = buffer(op->buffer);
  if (op->value.type() != buf.dtype) {
    fail("store of a " + std::string(dsl::dtype_name(op->value.type())) + " value into " + dsl::dtype_name(buf.dtype) +
         " buffer '" + op->buffer + "'");
  }
  set_root({&op->index, &op->value});
  Value* v = expr(op->value);
  Value* idx = expr(op->index);
  Type* st = storage_type(ctx_, buf.dtype);
  const llvm::Align align(static_cast<uint64_t>(dsl::dtype_size(buf.dtype)));
  if (!idx->getType()->isVectorTy()) {
    // A uniform index: iterations run in order, so the last lane's value remains.
    if (v->getType()->isVectorTy()) v = b_.CreateExtractElement(v, static_cast<uint64_t>(lane_width_ - 1));
    b_.CreateAlignedStore(to_storage(b_, v, buf.dtype), element_ptr(buf, idx), align);
    return;
  }
  v = to_storage(b_, splat(v), buf.dtype);
  if (lane_stride(op->index) == 1) {
    Value* base = b_.CreateExtractElement(idx, uint64_t{0});
    auto* vty = llvm::FixedVectorType::get(st, static_cast<unsigned>(lane_width_));
    b_.CreateAlignedStore(v, b_.CreateBitCast(element_ptr(buf, base), vty->getPointerTo()), align);
    return;
  }
  for (int64_t k = 0; k < lane_width_; ++k) {  // scatter, in lane order
    const auto lane = static_cast<uint64_t>(k);
    b_.CreateAlignedStore(b_.CreateExtractElement(v, lane), element_ptr(buf, b_.CreateExtractElement(idx, lane)),
                          align);
  }
}

void Codegen::emit_if(const dsl::IfThenElse* op) {
  set_root({&op->cond});
  Value* c = expr(op->cond);
  if (c->getType()->isVectorTy()) fail("internal: lane-dependent condition in a vector loop");
  llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
  llvm::BasicBlock* merge = llvm::BasicBlock::Create(ctx_, "endif");
  llvm::BasicBlock* else_bb = op->else_case.defined() ? llvm::BasicBlock::Create(ctx_, "else") : merge;
  b_.CreateCondBr(c, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  emit(op->then_case);
  b_.CreateBr(merge);
  if (op->else_case.defined()) {
    else_bb->insertInto(fn_);
    b_.SetInsertPoint(else_bb);
    emit(op->else_case);
    b_.CreateBr(merge);
  }
  merge->insertInto(fn_);
  b_.SetInsertPoint(merge);
}

void Codegen::emit_allocate(const dsl::Allocate* op) {
  if (op->scope != dsl::MemoryScope::Local) cuda_only("shared memory allocation");
  if (op->size < 0) fail("allocation '" + op->name + "' has negative size");
  Type* st = storage_type(ctx_, op->dtype);
  auto* arr = llvm::ArrayType::get(st, static_cast<uint64_t>(op->size));
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  llvm::AllocaInst* a = eb.CreateAlloca(arr, nullptr, op->name);
  a->setAlignment(llvm::Align(32));
  Value* ptr = eb.CreateConstInBoundsGEP2_64(arr, a, 0, 0);
  ScopedBinding<BufMap> bind(bufs_, op->name, BufInfo{ptr, op->dtype, true});
  emit(op->body);
}

// ---- expressions -----------------------------------------------------------------------------

int64_t Codegen::lane_stride(const dsl::Expr& e) const {
  auto combine = [](int64_t a, int64_t b, int sign) {
    return a == kNotAffine || b == kNotAffine ? kNotAffine : a + sign * b;
  };
  switch (e.kind()) {
    case ExprKind::IntImm:
    case ExprKind::FloatImm:
      return 0;
    case ExprKind::Var: {
      const std::string& name = e.as<dsl::Var>()->name;
      if (name == lane_var_) return 1;
      auto it = lane_strides_.find(name);
      return it == lane_strides_.end() ? 0 : it->second;
    }
    case ExprKind::Add:
    case ExprKind::Sub: {
      const auto* op = static_cast<const dsl::BinaryNode*>(e.get());
      return combine(lane_stride(op->a), lane_stride(op->b), e.kind() == ExprKind::Add ? 1 : -1);
    }
    case ExprKind::Mul: {
      const auto* op = e.as<dsl::Mul>();
      const int64_t sa = lane_stride(op->a), sb = lane_stride(op->b);
      if (sa == 0 && sb == 0) return 0;
      if (sa == 0 && sb != kNotAffine && const_int(op->a)) return *const_int(op->a) * sb;
      if (sb == 0 && sa != kNotAffine && const_int(op->b)) return *const_int(op->b) * sa;
      return kNotAffine;
    }
    case ExprKind::Cast: {
      const auto* op = e.as<dsl::Cast>();
      const int64_t s = lane_stride(op->value);
      if (s == 0) return 0;
      return dsl::is_integral(op->value.type()) && dsl::is_integral(e.type()) ? s : kNotAffine;
    }
    default: {
      bool uniform = true;
      for_each_child(e, [&](const dsl::Expr& c) { uniform = uniform && lane_stride(c) == 0; });
      return uniform ? 0 : kNotAffine;
    }
  }
}

Value* Codegen::expr(const dsl::Expr& e) {
  if (!e.defined()) fail("undefined expression in kernel '" + f_.name + "'");
  switch (e.kind()) {
    case ExprKind::IntImm:
      return llvm::ConstantInt::get(register_type(ctx_, e.type()), static_cast<uint64_t>(e.as<dsl::IntImm>()->value),
                                    true);
    case ExprKind::FloatImm:
      return llvm::ConstantFP::get(register_type(ctx_, e.type()), e.as<dsl::FloatImm>()->value);
    case ExprKind::Var: {
      const std::string& name = e.as<dsl::Var>()->name;
      auto it = vars_.find(name);
      if (it == vars_.end()) fail("unbound variable '" + name + "' in kernel '" + f_.name + "'");
      return it->second;
    }
    case ExprKind::Cast: {
      const auto* op = e.as<dsl::Cast>();
      return cast_value(b_, expr(op->value), op->value.type(), e.type());
    }
    case ExprKind::Reinterpret: {  // halves already live as i16, uint8 and int8 as i8
      Value* v = expr(e.as<dsl::Reinterpret>()->value);
      Type* t = register_type(ctx_, e.type());
      if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType()))
        t = llvm::FixedVectorType::get(t, vt->getNumElements());
      return v->getType() == t ? v : b_.CreateBitCast(v, t);
    }
#define FLOW_X(name) case ExprKind::name:
      FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X
      return emit_binary(static_cast<const dsl::BinaryNode*>(e.get()), e.kind());
    case ExprKind::Not:
      return b_.CreateNot(expr(e.as<dsl::Not>()->a));
    case ExprKind::Select:
      return emit_select(e.as<dsl::Select>());
    case ExprKind::Load:
      return emit_load(e.as<dsl::Load>());
    case ExprKind::Call:
      return emit_call(e.as<dsl::Call>());
  }
  fail("invalid expression kind");
}

// x * -1 and x / -1 (a constant -1, scalar or splat) as NaN ? x : -x. LLVM's InstCombine folds
// them into fneg, which flips a NaN's sign; the hardware multiply torch's kernels run returns a NaN
// operand with its sign (as does -1 * x). Null when `minus_one` is not that constant.
Value* Codegen::sign_flip_keeping_nan(Value* x, Value* minus_one) {
  if (!llvm::PatternMatch::match(minus_one, llvm::PatternMatch::m_SpecificFP(-1.0))) return nullptr;
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, b_.CreateFNeg(x));
}

Value* Codegen::emit_binary(const dsl::BinaryNode* op, ExprKind kind) {
  if ((kind == ExprKind::And || kind == ExprKind::Or) && lane_width_ == 0 && !speculatable(op->b)) {
    return emit_short_circuit(op, kind == ExprKind::And);
  }
  const DType t = op->a.type();
  Value* a = expr(op->a);
  Value* b = expr(op->b);
  unify(a, b);
  const bool fl = dsl::is_floating(t);
  const bool sign = t != DType::Bool;
  switch (kind) {
    case ExprKind::Add:
      return fl ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b);
    case ExprKind::Sub:
      return fl ? b_.CreateFSub(a, b) : b_.CreateSub(a, b);
    case ExprKind::Mul:
      if (fl) {
        if (Value* r = sign_flip_keeping_nan(a, b)) return r;
        if (Value* r = sign_flip_keeping_nan(b, a)) return r;
      }
      return fl ? b_.CreateFMul(a, b) : b_.CreateMul(a, b);
    case ExprKind::Div:
      if (fl) {
        if (Value* r = sign_flip_keeping_nan(a, b)) return r;
      }
      return fl ? b_.CreateFDiv(a, b) : int_div(a, b, false);
    case ExprKind::Mod:
      return fl ? b_.CreateFRem(a, b) : int_div(a, b, true);
    case ExprKind::Min:
      if (fl) return float_minmax(a, b, false);
      return b_.CreateSelect(sign ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b), a, b);
    case ExprKind::Max:
      if (fl) return float_minmax(a, b, true);
      return b_.CreateSelect(sign ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b), a, b);
    case ExprKind::EQ:
      return fl ? b_.CreateFCmpOEQ(a, b) : b_.CreateICmpEQ(a, b);
    case ExprKind::NE:
      return fl ? b_.CreateFCmpUNE(a, b) : b_.CreateICmpNE(a, b);
    case ExprKind::LT:
      return fl ? b_.CreateFCmpOLT(a, b) : sign ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b);
    case ExprKind::LE:
      return fl ? b_.CreateFCmpOLE(a, b) : sign ? b_.CreateICmpSLE(a, b) : b_.CreateICmpULE(a, b);
    case ExprKind::GT:
      return fl ? b_.CreateFCmpOGT(a, b) : sign ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b);
    case ExprKind::GE:
      return fl ? b_.CreateFCmpOGE(a, b) : sign ? b_.CreateICmpSGE(a, b) : b_.CreateICmpUGE(a, b);
    case ExprKind::And:
      return b_.CreateAnd(a, b);
    case ExprKind::Or:
      return b_.CreateOr(a, b);
    default:
      fail("invalid binary expression kind");
  }
}

Value* Codegen::emit_short_circuit(const dsl::BinaryNode* op, bool is_and) {
  Value* a = expr(op->a);
  llvm::BasicBlock* cur = b_.GetInsertBlock();
  llvm::BasicBlock* rhs = llvm::BasicBlock::Create(ctx_, is_and ? "and.rhs" : "or.rhs", fn_);
  llvm::BasicBlock* merge = llvm::BasicBlock::Create(ctx_, is_and ? "and.end" : "or.end");
  if (is_and) {
    b_.CreateCondBr(a, rhs, merge);
  } else {
    b_.CreateCondBr(a, merge, rhs);
  }
  b_.SetInsertPoint(rhs);
  Value* bv = expr(op->b);
  llvm::BasicBlock* rhs_end = b_.GetInsertBlock();
  b_.CreateBr(merge);
  merge->insertInto(fn_);
  b_.SetInsertPoint(merge);
  llvm::PHINode* phi = b_.CreatePHI(b_.getInt1Ty(), 2);
  phi->addIncoming(is_and ? b_.getFalse() : b_.getTrue(), cur);
  phi->addIncoming(bv, rhs_end);
  return phi;
}

Value* Codegen::emit_select(const dsl::Select* op) {
  if (lane_width_ == 0 && (!speculatable(op->true_value) || !speculatable(op->false_value))) {
    Value* c = expr(op->cond);
    llvm::BasicBlock* t_bb = llvm::BasicBlock::Create(ctx_, "sel.true", fn_);
    llvm::BasicBlock* f_bb = llvm::BasicBlock::Create(ctx_, "sel.false");
    llvm::BasicBlock* merge = llvm::BasicBlock::Create(ctx_, "sel.end");
    b_.CreateCondBr(c, t_bb, f_bb);
    b_.SetInsertPoint(t_bb);
    Value* tv = expr(op->true_value);
    llvm::BasicBlock* t_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    f_bb->insertInto(fn_);
    b_.SetInsertPoint(f_bb);
    Value* fv = expr(op->false_value);
    llvm::BasicBlock* f_end = b_.GetInsertBlock();
    b_.CreateBr(merge);
    merge->insertInto(fn_);
    b_.SetInsertPoint(merge);
    llvm::PHINode* phi = b_.CreatePHI(tv->getType(), 2);
    phi->addIncoming(tv, t_end);
    phi->addIncoming(fv, f_end);
    return phi;
  }
  Value* c = expr(op->cond);
  Value* tv = expr(op->true_value);
  Value* fv = expr(op->false_value);
  unify(tv, fv);
  if (c->getType()->isVectorTy()) {
    tv = splat(tv);
    fv = splat(fv);
  }
  return b_.CreateSelect(c, tv, fv);
}

Value* Codegen::emit_load(const dsl::Load* op) {
  const BufInfo& buf = buffer(op->buffer);
  if (op->type != buf.dtype) {
    fail("load of " + std::string(dsl::dtype_name(op->type)) + " from " + dsl::dtype_name(buf.dtype) + " buffer '" +
         op->buffer + "'");
  }
  Type* st = storage_type(ctx_, buf.dtype);
  const llvm::Align align(static_cast<uint64_t>(dsl::dtype_size(buf.dtype)));
  Value* idx = expr(op->index);
  if (!idx->getType()->isVectorTy()) {
    return from_storage(b_, b_.CreateAlignedLoad(st, element_ptr(buf, idx), align), buf.dtype);
  }
  auto* vty = llvm::FixedVectorType::get(st, static_cast<unsigned>(lane_width_));
  const int64_t stride = lane_stride(op->index);
  if (stride == 1) {
    Value* base = b_.CreateExtractElement(idx, uint64_t{0});
    Value* p = b_.CreateBitCast(element_ptr(buf, base), vty->getPointerTo());
    return from_storage(b_, b_.CreateAlignedLoad(vty, p, align), buf.dtype);
  }
  if (const std::optional<LaneForm> form = lane_form(op->index, lanes_)) {
    // Lanes at distances from lane 0 known here (interleaved RGB bytes, a reversed dim, pixels of a
    // flipped row): one contiguous load of the span the lanes touch (from the lowest lane's element
    // to the highest's, so nothing outside the data), then a shuffle instead of a gather.
    const std::vector<int64_t> offsets = form->relative().v;
    const auto [lo, hi] = std::minmax_element(offsets.begin(), offsets.end());
    const int64_t span = *hi - *lo + 1;
    if (span <= kMaxShuffleStride * lane_width_) {
      auto* wide = llvm::FixedVectorType::get(st, static_cast<unsigned>(span));
      Value* base = b_.CreateExtractElement(idx, uint64_t{0});
      base = b_.CreateAdd(base, llvm::ConstantInt::get(base->getType(), static_cast<uint64_t>(*lo), true));
      Value* all = b_.CreateAlignedLoad(wide, b_.CreateBitCast(element_ptr(buf, base), wide->getPointerTo()), align);
      std::vector<int> mask;
      for (const int64_t o : offsets) mask.push_back(static_cast<int>(o - *lo));
      return from_storage(b_, b_.CreateShuffleVector(all, mask), buf.dtype);
    }
  }
  Value* v = llvm::PoisonValue::get(vty);  // gather, lane by lane
  for (int64_t k = 0; k < lane_width_; ++k) {
    const auto lane = static_cast<uint64_t>(k);
    Value* x = b_.CreateAlignedLoad(st, element_ptr(buf, b_.CreateExtractElement(idx, lane)), align);
    v = b_.CreateInsertElement(v, x, lane);
  }
  return from_storage(b_, v, buf.dtype);
}

Value* Codegen::int_div(Value* a, Value* b, bool is_mod) {
  Type* ty = a->getType();
  Value* zero = b_.CreateICmpEQ(b, llvm::Constant::getNullValue(ty));
  Value* minus1 = b_.CreateICmpEQ(b, llvm::Constant::getAllOnesValue(ty));
  Value* special = b_.CreateOr(zero, minus1);
  Value* safe = b_.CreateSelect(special, llvm::ConstantInt::get(ty, 1), b);
  if (is_mod) return b_.CreateSelect(special, llvm::Constant::getNullValue(ty), b_.CreateSRem(a, safe));
  Value* q = b_.CreateSelect(minus1, b_.CreateNeg(a), b_.CreateSDiv(a, safe));
  return b_.CreateSelect(zero, llvm::Constant::getNullValue(ty), q);
}

Value* Codegen::float_minmax(Value* a, Value* b, bool is_max) {
  Value* pick_a = is_max ? b_.CreateFCmpOGT(a, b) : b_.CreateFCmpOLT(a, b);
  Value* r = b_.CreateSelect(pick_a, a, b);
  // Equal operands: only +-0 differ; and-ing the bits prefers +0 (max), or-ing prefers -0 (min).
  Type* ity = a->getType()->getScalarType()->isFloatTy() ? b_.getInt32Ty() : b_.getInt64Ty();
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(a->getType()))
    ity = llvm::VectorType::get(ity, vt->getElementCount());
  Value* ab = b_.CreateBitCast(a, ity);
  Value* bb = b_.CreateBitCast(b, ity);
  Value* zero_fix = b_.CreateBitCast(is_max ? b_.CreateAnd(ab, bb) : b_.CreateOr(ab, bb), a->getType());
  r = b_.CreateSelect(b_.CreateFCmpOEQ(a, b), zero_fix, r);
  return b_.CreateSelect(b_.CreateFCmpUNO(a, b), b_.CreateFAdd(a, b), r);
}

Value* Codegen::libm_call(const char* name, Value* x, Value* y) {
  Type* sty = x->getType()->getScalarType();
  std::vector<Type*> params(y ? 2 : 1, sty);
  llvm::FunctionCallee fn = mod_.getOrInsertFunction(name, llvm::FunctionType::get(sty, params, false));
  if (auto* decl = llvm::dyn_cast<llvm::Function>(fn.getCallee())) decl->addFnAttr(llvm::Attribute::NoUnwind);
  if (!x->getType()->isVectorTy()) return y ? b_.CreateCall(fn, {x, y}) : b_.CreateCall(fn, {x});
  Value* r = llvm::PoisonValue::get(x->getType());
  for (int64_t k = 0; k < lane_width_; ++k) {
    const auto lane = static_cast<uint64_t>(k);
    Value* xl = b_.CreateExtractElement(x, lane);
    Value* call = y ? b_.CreateCall(fn, {xl, b_.CreateExtractElement(y, lane)}) : b_.CreateCall(fn, {xl});
    r = b_.CreateInsertElement(r, call, lane);
  }
  return r;
}

Value* Codegen::emit_call(const dsl::Call* op) {
  const size_t arity = static_cast<size_t>(dsl::intrinsic_arity(op->func));
  if (op->args.size() != arity) {
    fail(std::string(dsl::intrinsic_name(op->func)) + " takes " + std::to_string(arity) + " argument(s)");
  }
  const DType t = op->args[0].type();
  if (dsl::is_half(t)) fail(std::string(dsl::intrinsic_name(op->func)) + " on a half type (cast to float32 first)");
  const bool fl = dsl::is_floating(t);
  const bool f32 = t == DType::Float32;
  Value* x = expr(op->args[0]);
  auto need_float = [&] {
    if (!fl) fail(std::string(dsl::intrinsic_name(op->func)) + " needs a floating argument");
  };
  switch (op->func) {
    case dsl::Intrinsic::CheckIndex:
      return emit_check_index(op, x);
    case dsl::Intrinsic::Neg:
      return fl ? b_.CreateFNeg(x) : b_.CreateNeg(x);
    case dsl::Intrinsic::Abs:
      if (fl) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
    case dsl::Intrinsic::Exp:
      need_float();
      return f32 ? exp_f32(b_, x) : b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
    case dsl::Intrinsic::Log:
      need_float();
      return f32 ? log_f32(b_, x) : b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
    case dsl::Intrinsic::Sqrt:
      need_float();
      return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
    case dsl::Intrinsic::Rsqrt: {
      // float32: 1 / sqrt in double, rounded once (what the interpreter computes; sqrtf then a float
      // division would round twice, up to 1.5 ulp).
      need_float();
      Value* xd = f32 ? b_.CreateFPExt(x, with_scalar(x->getType(), b_.getDoubleTy())) : x;
      Value* r =
          b_.CreateFDiv(llvm::ConstantFP::get(xd->getType(), 1.0), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, xd));
      return f32 ? b_.CreateFPTrunc(r, x->getType()) : r;
    }
    case dsl::Intrinsic::Tanh:
      need_float();
      return f32 ? tanh_f32(b_, x) : libm_call("tanh", x);
    case dsl::Intrinsic::Erf:
      need_float();
      return f32 ? erf_f32(b_, x) : libm_call("erf", x);
    case dsl::Intrinsic::Pow: {
      Value* y = expr(op->args[1]);
      unify(x, y);
      return fl ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, y) : emit_integer_pow(x, y);
    }
    case dsl::Intrinsic::Floor:
      return fl ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x) : x;
    case dsl::Intrinsic::Ceil:
      return fl ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x) : x;
    case dsl::Intrinsic::IsNan:
      if (fl) return b_.CreateFCmpUNO(x, x);
      return b_.CreateICmpNE(x, x);  // integers are never NaN (folds to false)
    case dsl::Intrinsic::Sin:
      // llvm.sin/llvm.cos: the loop vectorizer widens them and the backend calls libm's sinf/sin per
      // lane (there is no inline vector polynomial for them yet).
      need_float();
      return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sin, x);
    case dsl::Intrinsic::Cos:
      need_float();
      return b_.CreateUnaryIntrinsic(llvm::Intrinsic::cos, x);
    case dsl::Intrinsic::Log1p: {
      // Goldberg's log1p(x) = x * log(u) / (u - 1), u = 1 + x (exact to a few ulp given an accurate
      // log), branch-free over the vectorizable log: u == 1 gives x (and keeps -0), u = inf gives inf.
      need_float();
      Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
      Value* u = b_.CreateFAdd(one, x);
      Value* lg = f32 ? log_f32(b_, u) : b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, u);
      Value* r = b_.CreateFMul(lg, b_.CreateFDiv(x, b_.CreateFSub(u, one)));
      r = b_.CreateSelect(b_.CreateFCmpOEQ(u, llvm::ConstantFP::getInfinity(x->getType())), u, r);
      return b_.CreateSelect(b_.CreateFCmpOEQ(u, one), x, r);
    }
    case dsl::Intrinsic::Expm1: {
      // Kahan's expm1(x) = (u - 1) * x / log(u), u = exp(x); u == 1 gives x, u - 1 == -1 gives -1,
      // u = inf gives inf.
      need_float();
      Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
      Value* u = f32 ? exp_f32(b_, x) : b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, x);
      Value* um1 = b_.CreateFSub(u, one);
      Value* lg = f32 ? log_f32(b_, u) : b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, u);
      Value* r = b_.CreateFDiv(b_.CreateFMul(um1, x), lg);
      r = b_.CreateSelect(b_.CreateFCmpOEQ(u, llvm::ConstantFP::getInfinity(x->getType())), u, r);
      r = b_.CreateSelect(b_.CreateFCmpOEQ(um1, llvm::ConstantFP::get(x->getType(), -1.0)), um1, r);
      return b_.CreateSelect(b_.CreateFCmpOEQ(u, one), x, r);
    }
    case dsl::Intrinsic::Trunc:
      return fl ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x) : x;
    case dsl::Intrinsic::Round:
      return fl ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x) : x;
    // Log2/Log10/Exp2 call libm too: LLVM 14's x86 backend fails instruction selection on a vector
    // llvm.exp2 ("Cannot select: zero_extend"), and libm's are correctly rounded.
    case dsl::Intrinsic::Log2:
    case dsl::Intrinsic::Log10:
    case dsl::Intrinsic::Exp2:
    case dsl::Intrinsic::Tan:
    case dsl::Intrinsic::Atan:
    case dsl::Intrinsic::Asin:
    case dsl::Intrinsic::Acos:
    case dsl::Intrinsic::Sinh:
    case dsl::Intrinsic::Cosh:
    case dsl::Intrinsic::Asinh:
    case dsl::Intrinsic::Acosh:
    case dsl::Intrinsic::Atanh:
    case dsl::Intrinsic::Erfc: {
      // C's function (tanf / tan, ...), one call per lane: correct to libm's ulp, not vectorized.
      need_float();
      const std::string name = std::string(dsl::intrinsic_name(op->func)) + (f32 ? "f" : "");
      return libm_call(name.c_str(), x);
    }
    case dsl::Intrinsic::Atan2:
    case dsl::Intrinsic::Hypot: {
      need_float();
      Value* y = expr(op->args[1]);
      unify(x, y);
      const std::string name = std::string(dsl::intrinsic_name(op->func)) + (f32 ? "f" : "");
      return libm_call(name.c_str(), x, y);
    }
    case dsl::Intrinsic::BitAnd:
    case dsl::Intrinsic::BitOr:
    case dsl::Intrinsic::BitXor:
    case dsl::Intrinsic::Shl:
    case dsl::Intrinsic::Shr: {
      if (fl) fail(std::string(dsl::intrinsic_name(op->func)) + " needs integer arguments");
      Value* y = expr(op->args[1]);
      unify(x, y);
      switch (op->func) {
        case dsl::Intrinsic::BitAnd:
          return b_.CreateAnd(x, y);
        case dsl::Intrinsic::BitOr:
          return b_.CreateOr(x, y);
        case dsl::Intrinsic::BitXor:
          return b_.CreateXor(x, y);
        case dsl::Intrinsic::Shl:  // the count is in [0, bits) (the ops clamp it)
          return b_.CreateShl(x, y);
        default:
          return b_.CreateAShr(x, y);
      }
    }
  }
  fail("invalid intrinsic");
}

// CheckIndex(i, lo, hi, dim): i, after a branch (taken only when some lane is out of [lo, hi)) to a
// block that reports each lane through flow_report_index_error (runtime/device_error.h).
// torch's powi (dsl/expr.h): a loop of squarings while any lane's exponent has bits left; the
// multiplications wrap. A negative exponent gives 1, +-1 or 0.
Value* Codegen::emit_integer_pow(Value* base, Value* exp) {
  Type* t = base->getType();
  Value* zero = llvm::Constant::getNullValue(t);
  Value* one = llvm::ConstantInt::get(t, 1);
  Value* minus_one = llvm::Constant::getAllOnesValue(t);
  Value* negative = b_.CreateICmpSLT(exp, zero);
  llvm::BasicBlock* entry = b_.GetInsertBlock();
  llvm::BasicBlock* loop = llvm::BasicBlock::Create(ctx_, "ipow.loop", fn_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "ipow.done", fn_);
  Value* e0 = b_.CreateSelect(negative, zero, exp);
  b_.CreateBr(loop);
  b_.SetInsertPoint(loop);
  llvm::PHINode* r = b_.CreatePHI(t, 2, "ipow.r");
  llvm::PHINode* b = b_.CreatePHI(t, 2, "ipow.b");
  llvm::PHINode* e = b_.CreatePHI(t, 2, "ipow.e");
  Value* odd = b_.CreateICmpNE(b_.CreateAnd(e, one), zero);
  Value* r_next = b_.CreateSelect(odd, b_.CreateMul(r, b), r);
  Value* b_next = b_.CreateMul(b, b);
  Value* e_next = b_.CreateLShr(e, one);
  Value* more = b_.CreateICmpNE(e_next, zero);
  if (more->getType()->isVectorTy()) more = b_.CreateOrReduce(more);
  r->addIncoming(one, entry);
  b->addIncoming(base, entry);
  e->addIncoming(e0, entry);
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  r->addIncoming(r_next, latch);
  b->addIncoming(b_next, latch);
  e->addIncoming(e_next, latch);
  b_.CreateCondBr(more, loop, done);
  b_.SetInsertPoint(done);
  Value* odd_exp = b_.CreateICmpNE(b_.CreateAnd(exp, one), zero);
  Value* of_minus_one = b_.CreateSelect(odd_exp, minus_one, one);
  Value* negative_power = b_.CreateSelect(b_.CreateICmpEQ(base, one), one,
                                          b_.CreateSelect(b_.CreateICmpEQ(base, minus_one), of_minus_one, zero));
  return b_.CreateSelect(negative, negative_power, r_next);
}

Value* Codegen::emit_check_index(const dsl::Call* op, Value* i) {
  auto word = bufs_.find(kErrorWord);
  if (word == bufs_.end()) fail("kernel '" + f_.name + "' checks an index but has no error word");
  Value* lo = expr(op->args[1]);
  Value* hi = expr(op->args[2]);
  Value* dim = expr(op->args[3]);
  Value* iv = i;
  Value* lo_v = lo;
  Value* hi_v = hi;
  unify(iv, lo_v);
  unify(iv, hi_v);
  unify(lo_v, hi_v);
  // i outside [lo, hi) <=> (unsigned)(i - lo) >= (unsigned)(hi - lo): one compare per lane.
  Value* bad = b_.CreateICmpUGE(b_.CreateSub(iv, lo_v), b_.CreateSub(hi_v, lo_v));
  if (bad->getType()->isVectorTy()) bad = b_.CreateOrReduce(bad);
  llvm::BasicBlock* report = llvm::BasicBlock::Create(ctx_, "index.bad", fn_);
  llvm::BasicBlock* ok = llvm::BasicBlock::Create(ctx_, "index.ok", fn_);
  llvm::MDBuilder md(ctx_);
  b_.CreateCondBr(bad, report, ok, md.createBranchWeights(1, 1 << 20));
  b_.SetInsertPoint(report);
  Type* i64 = b_.getInt64Ty();
  llvm::FunctionCallee fn = mod_.getOrInsertFunction(
      "flow_report_index_error",
      llvm::FunctionType::get(b_.getVoidTy(), {i64->getPointerTo(), i64, i64, i64, i64}, false));
  if (auto* decl = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    decl->addFnAttr(llvm::Attribute::NoUnwind);
    decl->addFnAttr(llvm::Attribute::ArgMemOnly);  // writes the word only: loads around it stay CSE-able
  }
  const auto lane = [&](Value* v, int64_t k) {
    return v->getType()->isVectorTy() ? b_.CreateExtractElement(v, static_cast<uint64_t>(k)) : v;
  };
  const int64_t lanes = i->getType()->isVectorTy() ? lane_width_ : 1;
  for (int64_t k = 0; k < lanes; ++k)
    b_.CreateCall(fn, {word->second.ptr, lane(i, k), lane(lo, k), lane(hi, k), lane(dim, k)});
  b_.CreateBr(ok);
  b_.SetInsertPoint(ok);
  return i;
}

}  // namespace

std::unique_ptr<llvm::Module> build_module(const dsl::LoweredFunc& f, llvm::LLVMContext& ctx,
                                           const CodegenOptions& opt) {
  auto m = std::make_unique<llvm::Module>(f.name, ctx);
  Codegen(f, ctx, *m, opt).run();
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*m, &os)) {
    os.flush();
    fail("generated IR for kernel '" + f.name + "' does not verify: " + err);
  }
  return m;
}

}  // namespace flow::jit::llvm_backend::ir

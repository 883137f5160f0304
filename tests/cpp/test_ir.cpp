// Tests of the IR foundation: dtypes, expression/statement builders and their type checks, the
// visitor, mutator, substitute, structural equality and the printer.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>

#include "dsl/canonical_names.h"
#include "dsl/ir_visitor.h"
#include "dsl/serialize.h"
#include "dsl/simplify.h"
#include "test_util.h"

namespace flow::dsl {
namespace {

TEST(Types, NamesSizesAndPredicates) {
  const char* names[] = {"bool",    "int32",   "int64", "float16", "bfloat16",
                         "float32", "float64", "uint8", "int8",    "int16"};
  const int sizes[] = {1, 4, 8, 2, 2, 4, 8, 1, 1, 2};
  static_assert(std::size(names) == std::size(kAllDTypes));
  for (size_t i = 0; i < std::size(names); ++i) {
    EXPECT_STREQ(dtype_name(kAllDTypes[i]), names[i]);
    EXPECT_EQ(dtype_from_name(names[i]), kAllDTypes[i]);
    EXPECT_EQ(dtype_size(kAllDTypes[i]), sizes[i]);
  }
  EXPECT_THROW(dtype_from_name("float8"), std::invalid_argument);
  EXPECT_TRUE(is_floating(DType::BFloat16));
  EXPECT_FALSE(is_integral(DType::Bool));
  EXPECT_TRUE(is_half(DType::Float16));
  EXPECT_EQ(compute_dtype(DType::BFloat16), DType::Float32);
  EXPECT_EQ(compute_dtype(DType::Int32), DType::Int32);
  for (const DType t : {DType::UInt8, DType::Int8, DType::Int16}) {
    EXPECT_TRUE(is_small_int(t) && is_integer(t) && is_storage_only(t) && !is_integral(t)) << dtype_name(t);
    EXPECT_EQ(compute_dtype(t), DType::Int32);
  }
  EXPECT_EQ(dtype_from_name("short"), DType::Int16);
  EXPECT_EQ(integer_min(DType::UInt8), 0);
  EXPECT_EQ(integer_max(DType::UInt8), 255);
  EXPECT_EQ(integer_min(DType::Int8), -128);
  EXPECT_EQ(integer_max(DType::Int16), 32767);
  EXPECT_EQ(integer_min(DType::Int32), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(integer_max(DType::Int64), std::numeric_limits<int64_t>::max());
  EXPECT_THROW(integer_min(DType::Float16), std::invalid_argument);
  EXPECT_EQ(wrap_integer(DType::UInt8, -1), 255);
  EXPECT_EQ(wrap_integer(DType::UInt8, 300), 44);
  EXPECT_EQ(wrap_integer(DType::Int8, 200), -56);
  EXPECT_EQ(wrap_integer(DType::Int16, 100000), -31072);
  EXPECT_EQ(wrap_integer(DType::Int32, int64_t{1} << 31), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(wrap_integer(DType::Int64, -5), -5);
  EXPECT_EQ(wrap_integer(DType::Bool, -7), 1);
  EXPECT_THROW(wrap_integer(DType::Float32, 1), std::invalid_argument);
  EXPECT_EQ(numel({2, 3, 4}), 24);
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(shape_str({2, 3}), "[2, 3]");
}

TEST(Types, PromoteTypesMatchesTorch) {
  using D = DType;
  struct Case {
    D a, b, r;
  } cases[] = {
      {D::Bool, D::Int32, D::Int32},        {D::Bool, D::Float16, D::Float16},
      {D::Int32, D::Int64, D::Int64},       {D::Int64, D::Float16, D::Float16},
      {D::Int64, D::BFloat16, D::BFloat16}, {D::Float16, D::BFloat16, D::Float32},
      {D::Float16, D::Float32, D::Float32}, {D::BFloat16, D::Float64, D::Float64},
      {D::Float32, D::Float64, D::Float64}, {D::Int32, D::Float32, D::Float32},
      {D::Bool, D::Bool, D::Bool},          {D::Float16, D::Float16, D::Float16},
      {D::UInt8, D::Int8, D::Int16},        {D::UInt8, D::Bool, D::UInt8},
      {D::Int8, D::Int16, D::Int16},        {D::UInt8, D::Int32, D::Int32},
      {D::Int16, D::Float16, D::Float16},   {D::UInt8, D::UInt8, D::UInt8},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(promote_types(c.a, c.b), c.r) << dtype_name(c.a) << " " << dtype_name(c.b);
    EXPECT_EQ(promote_types(c.b, c.a), c.r) << dtype_name(c.b) << " " << dtype_name(c.a);
  }
}

TEST(Expr, LiteralAdaptationAndTypes) {
  Expr i = var("i", DType::Int32);
  Expr e = i + 1;
  EXPECT_EQ(e.type(), DType::Int32);
  ASSERT_NE(e.as<Add>(), nullptr);
  EXPECT_EQ(e.as<Add>()->b.type(), DType::Int32);
  Expr f = 3 * i;  // the literal on the left adapts too
  EXPECT_EQ(f.as<Mul>()->a.type(), DType::Int32);
  EXPECT_EQ((var("j") + 1).type(), DType::Int64);
  EXPECT_EQ((i < 4).type(), DType::Bool);
  EXPECT_EQ(Expr(7).type(), DType::Int64);
  EXPECT_EQ(Expr(int64_t{1} << 40).as<IntImm>()->value, int64_t{1} << 40);
}

TEST(Expr, TypeErrors) {
  Expr i32 = var("i", DType::Int32);
  Expr i64 = var("j", DType::Int64);
  Expr f32 = var("x", DType::Float32);
  Expr f64 = var("y", DType::Float64);
  Expr b = var("p", DType::Bool);
  EXPECT_THROW(i32 + i64, std::invalid_argument);
  EXPECT_THROW(f32 * f64, std::invalid_argument);
  EXPECT_THROW(f32 + 1, std::invalid_argument);  // integer literals never become floats
  EXPECT_THROW(i32 + (int64_t{1} << 40), std::invalid_argument);
  EXPECT_THROW(b + b, std::invalid_argument);
  EXPECT_THROW(var("h", DType::Float16) + var("g", DType::Float16), std::invalid_argument);
  EXPECT_THROW(i64 && b, std::invalid_argument);
  EXPECT_THROW(!i64, std::invalid_argument);
  EXPECT_THROW(select(i64, f32, f32), std::invalid_argument);
  EXPECT_THROW(select(b, f32, f64), std::invalid_argument);
  EXPECT_THROW(call(Intrinsic::Exp, {i64}), std::invalid_argument);
  EXPECT_THROW(call(Intrinsic::Pow, {f32}), std::invalid_argument);
  EXPECT_THROW(call(Intrinsic::Pow, {f32, f64}), std::invalid_argument);
  EXPECT_THROW(load(DType::Float32, "buf", f32), std::invalid_argument);
  EXPECT_THROW(make_int(int64_t{1} << 40, DType::Int32), std::invalid_argument);
  EXPECT_THROW(make_int(2, DType::Bool), std::invalid_argument);
  EXPECT_THROW(make_float(1.0, DType::Int32), std::invalid_argument);
  EXPECT_THROW(make_binary(ExprKind::Var, i64, i64), std::invalid_argument);
  EXPECT_THROW(i64 + Expr(), std::invalid_argument);
  EXPECT_THROW(var(""), std::invalid_argument);
  // and the accepted forms
  EXPECT_EQ(call(Intrinsic::IsNan, {f32}).type(), DType::Bool);
  EXPECT_EQ(call(Intrinsic::Abs, {i32}).type(), DType::Int32);
  EXPECT_EQ((-f64).type(), DType::Float64);
  EXPECT_EQ(min(b, b).type(), DType::Bool);
  EXPECT_EQ(select(b, i32, 5).type(), DType::Int32);
  EXPECT_EQ(make_binary(ExprKind::GE, i32, 2).type(), DType::Bool);
}

TEST(Expr, ConstantsAndCasts) {
  EXPECT_EQ(*as_const_float(make_float(0.1, DType::Float32)), static_cast<double>(0.1f));
  EXPECT_EQ(*as_const_float(make_float(0.1, DType::Float64)), 0.1);
  EXPECT_TRUE(is_const_int(make_zero(DType::Int32), 0));
  EXPECT_TRUE(is_const_int(make_one(DType::Bool), 1));
  EXPECT_EQ(make_zero(DType::BFloat16).type(), DType::BFloat16);
  Expr x = var("x", DType::Float32);
  EXPECT_TRUE(cast(DType::Float32, x).same_as(x));
  EXPECT_EQ(cast(DType::Float16, x).kind(), ExprKind::Cast);
  EXPECT_FALSE(is_const_int(x, 0));
  EXPECT_STREQ(expr_kind_name(ExprKind::Select), "Select");
  EXPECT_STREQ(intrinsic_name(Intrinsic::IsNan), "is_nan");
  EXPECT_EQ(intrinsic_arity(Intrinsic::Pow), 2);
  EXPECT_EQ(intrinsic_arity(Intrinsic::Tanh), 1);
}

TEST(Stmt, BuildersAndChecks) {
  Stmt s1 = make_store("out", Expr(0), make_float(1, DType::Float32));
  Stmt s2 = make_store("out", Expr(1), make_float(2, DType::Float32));
  Stmt nested = make_block({s1, Stmt(), make_block({s2, make_block({})})});
  ASSERT_NE(nested.as<Block>(), nullptr);
  ASSERT_EQ(nested.as<Block>()->stmts.size(), 2u);
  EXPECT_TRUE(nested.as<Block>()->stmts[1].same_as(s2));
  EXPECT_TRUE(make_block({Stmt(), s1}).same_as(s1));
  EXPECT_EQ(make_block({}).as<Block>()->stmts.size(), 0u);

  EXPECT_THROW(make_for("v", 0, var("n"), ForKind::Vectorized, s1), std::invalid_argument);
  EXPECT_THROW(make_for("b", 0, 4, ForKind::GPUBlock, s1, 3), std::invalid_argument);
  EXPECT_THROW(make_for("i", 0, 4, ForKind::Serial, s1, 1), std::invalid_argument);
  EXPECT_THROW(make_for("i", 0, make_float(4, DType::Float32), ForKind::Serial, s1), std::invalid_argument);
  EXPECT_THROW(make_for("i", 0, 4, ForKind::Serial, Stmt()), std::invalid_argument);
  EXPECT_THROW(make_if(var("n"), s1), std::invalid_argument);
  EXPECT_THROW(make_allocate("acc", DType::Float32, 0, MemoryScope::Local, s1), std::invalid_argument);
  EXPECT_THROW(make_store("out", make_float(0, DType::Float32), make_float(0, DType::Float32)), std::invalid_argument);
  // Int32 loop bounds are widened to the Int64 loop variable's type.
  Stmt f = make_for("i", 0, var("n", DType::Int32), ForKind::Parallel, s1);
  EXPECT_EQ(f.as<For>()->extent.type(), DType::Int64);
  EXPECT_STREQ(stmt_kind_name(StmtKind::BlockReduce), "BlockReduce");
  EXPECT_STREQ(for_kind_name(ForKind::GPUThread), "gpu_thread");
  EXPECT_STREQ(target_name(Target::CUDA), "cuda");
  EXPECT_STREQ(reduce_op_name(ReduceOp::Max), "max");
}

TEST(Stmt, ReduceIdentityAndCombine) {
  EXPECT_EQ(*as_const_float(reduce_identity(ReduceOp::Max, DType::Float32)), -INFINITY);
  EXPECT_EQ(*as_const_float(reduce_identity(ReduceOp::Min, DType::Float64)), INFINITY);
  EXPECT_EQ(*as_const_float(reduce_identity(ReduceOp::Sum, DType::Float32)), 0.0);
  EXPECT_EQ(*as_const_int(reduce_identity(ReduceOp::Max, DType::Int32)), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(*as_const_int(reduce_identity(ReduceOp::Min, DType::Int64)), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(reduce_identity(ReduceOp::Max, DType::Float16).type(), DType::Float16);

  // Evaluate combine on constants through the simplifier's folding.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto fold = [](ReduceOp op, double a, double b) {
    Expr r = simplify(reduce_combine(op, make_float(a, DType::Float32), make_float(b, DType::Float32)));
    const double* v = as_const_float(r);
    EXPECT_NE(v, nullptr) << to_string(r);
    return v ? *v : 12345.0;
  };
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    EXPECT_TRUE(std::isnan(fold(op, nan, 1.0)));
    EXPECT_TRUE(std::isnan(fold(op, 1.0, nan)));
    EXPECT_TRUE(std::isnan(fold(op, nan, nan)));
  }
  EXPECT_EQ(fold(ReduceOp::Max, 1.0, 2.0), 2.0);
  EXPECT_EQ(fold(ReduceOp::Max, 2.0, -INFINITY), 2.0);
  EXPECT_EQ(fold(ReduceOp::Min, 1.0, 2.0), 1.0);
  EXPECT_EQ(fold(ReduceOp::Sum, 1.5, 2.0), 3.5);
  Expr imax = simplify(reduce_combine(ReduceOp::Max, make_int(3, DType::Int32), make_int(-4, DType::Int32)));
  EXPECT_TRUE(is_const_int(imax, 3));
}

// A small kernel used by the printer and traversal tests.
LoweredFunc small_func() {
  Expr i = var("i"), j = var("j"), n = var("n");
  Expr idx = i * 16 + j;
  Stmt store = make_store("out", idx, load(DType::Float32, "x", idx) * make_float(2, DType::Float32));
  Stmt inner = make_for("j", 0, 16, ForKind::Vectorized, store);
  Stmt guarded = make_if(i < n, inner, make_barrier());
  LoweredFunc f;
  f.name = "scale";
  f.target = Target::CUDA;
  f.params = {{"out", ParamKind::Buffer, DType::Float32, true},
              {"x", ParamKind::Buffer, DType::Float32, false},
              {"n", ParamKind::Scalar, DType::Int64, false}};
  f.body =
      make_for("i", 0, n, ForKind::GPUBlock, make_allocate("acc", DType::Float32, 4, MemoryScope::Shared, guarded));
  f.grid[0] = n;
  f.grid[1] = Expr(1);
  f.grid[2] = Expr(1);
  f.block[0] = Expr(1);
  f.block[1] = Expr(1);
  f.block[2] = Expr(1);
  f.shared_bytes = 16;
  return f;
}

TEST(Printer, LoopNest) {
  const LoweredFunc f = small_func();
  const std::string s = to_string(f);
  EXPECT_NE(s.find("cuda func scale(float32* out, float32 const* x, int64 n) {"), std::string::npos) << s;
  EXPECT_NE(s.find("// launch: grid(n, 1, 1), block(1, 1, 1), shared_bytes 16"), std::string::npos) << s;
  EXPECT_NE(s.find("gpu_block.x for (i = 0; i < n; i++) {"), std::string::npos) << s;
  EXPECT_NE(s.find("allocate shared float32 acc[4] {"), std::string::npos) << s;
  EXPECT_NE(s.find("      if (i < n) {"), std::string::npos) << s;
  EXPECT_NE(s.find("        vectorized for (j = 0; j < 16; j++) {"), std::string::npos) << s;
  EXPECT_NE(s.find("          out[i * 16 + j] = x[i * 16 + j] * 2.0f;"), std::string::npos) << s;
  EXPECT_NE(s.find("} else {"), std::string::npos) << s;
  EXPECT_NE(s.find("barrier();"), std::string::npos) << s;

  Expr a = var("a"), b = var("b"), c = var("c");
  EXPECT_EQ(to_string((a + b) * c), "(a + b) * c");
  EXPECT_EQ(to_string(a - (b - c)), "a - (b - c)");
  EXPECT_EQ(to_string(a - b + c), "a - b + c");
  EXPECT_EQ(to_string(var("i", DType::Int32) + 1), "i + int32(1)");
  EXPECT_EQ(to_string(cast(DType::Float64, cast(DType::Float32, a)) / make_float(0.1, DType::Float64)),
            "float64(float32(a)) / 0.1");
  EXPECT_EQ(to_string(select(a < b && !(b == c), min(a, b), max(b, c))),
            "select(a < b && !(b == c), min(a, b), max(b, c))");
  EXPECT_EQ(to_string(call(Intrinsic::Exp, {make_float(-INFINITY, DType::Float32)})), "exp(-inff)");
  Stmt let = make_let("t", a + 1, make_block_reduce(ReduceOp::Sum, "acc", DType::Float32));
  EXPECT_EQ(to_string(let), "let t = a + 1 {\n  block_reduce_sum<float32>(acc);\n}\n");
}

TEST(Visitor, CountsEveryNode) {
  struct Counter : IRVisitor {
    int exprs = 0, vars = 0, stores = 0;
    using IRVisitor::visit;
    void visit(const Expr& e) override {
      if (e.defined()) ++exprs;
      IRVisitor::visit(e);
    }
    void visit_Var(const Var*) override { ++vars; }
    void visit_Store(const Store* op) override {
      ++stores;
      IRVisitor::visit_Store(op);
    }
  } c;
  c.visit(small_func().body);
  // min/extent of two loops (4), if cond (3), store index (5), value (mul, load, index 5, const).
  EXPECT_EQ(c.stores, 1);
  EXPECT_EQ(c.vars, 1 + 2 + 2 + 2);  // extent n, i < n, store index i j, load index i j
  EXPECT_EQ(c.exprs, 4 + 3 + 5 + 1 + 1 + 5 + 1);
}

TEST(Mutator, IdentityKeepsPointers) {
  const LoweredFunc f = small_func();
  IRMutator m;
  EXPECT_TRUE(m.mutate(f.body).same_as(f.body));
  Expr e = select(var("a") < 3, var("a") * 2, -var("b"));
  EXPECT_TRUE(m.mutate(e).same_as(e));
}

TEST(Mutator, RebuildsOnlyChangedPath) {
  struct Bump : IRMutator {
    Expr mutate_IntImm(const IntImm* op, const Expr& self) override {
      return op->value == 7 ? make_int(8, op->type) : self;
    }
  } m;
  Expr left = var("a") * 3;
  Expr right = var("b") + 7;
  Expr e = left - right;
  Expr r = m.mutate(e);
  ASSERT_FALSE(r.same_as(e));
  EXPECT_TRUE(r.as<Sub>()->a.same_as(left));
  EXPECT_FALSE(r.as<Sub>()->b.same_as(right));
  EXPECT_EQ(to_string(r), "a * 3 - (b + 8)");

  Stmt s1 = make_store("o", Expr(0), Expr(1));
  Stmt s2 = make_store("o", Expr(1), Expr(7));
  Stmt blk = make_block({s1, s2});
  Stmt rb = m.mutate(blk);
  EXPECT_TRUE(rb.as<Block>()->stmts[0].same_as(s1));
  EXPECT_FALSE(rb.as<Block>()->stmts[1].same_as(s2));
}

TEST(Substitute, ReplacesAndRespectsShadowing) {
  Expr i = var("i"), n = var("n");
  Expr e = i * n + i;
  Expr r = substitute(e, "i", Expr(3));
  EXPECT_EQ(to_string(r), "3 * n + 3");
  EXPECT_TRUE(substitute(e, "k", Expr(3)).same_as(e));
  EXPECT_THROW(substitute(e, "i", make_float(1, DType::Float32)), std::invalid_argument);

  // for (i = i; i < n) { out[i] = i }: the bound i is shadowed in the body, not in min.
  Stmt loop = make_for("i", i, n, ForKind::Serial, make_store("out", i, i));
  Stmt rs = substitute(loop, "i", Expr(5));
  EXPECT_TRUE(is_const_int(rs.as<For>()->min, 5));
  EXPECT_TRUE(rs.as<For>()->body.same_as(loop.as<For>()->body));
  Stmt let = make_let("i", i + 1, make_store("out", i, n));
  Stmt rl = substitute(substitute(let, "i", Expr(2)), "n", Expr(9));
  EXPECT_EQ(to_string(rl), "let i = 2 + 1 {\n  out[i] = 9;\n}\n");
}

TEST(Equal, Structural) {
  Expr a = var("a") * 4 + 1;
  Expr b = var("a") * 4 + 1;
  EXPECT_FALSE(a.same_as(b));
  EXPECT_TRUE(equal(a, b));
  EXPECT_FALSE(equal(a, var("a") * 4 + 2));
  EXPECT_FALSE(equal(a, var("b") * 4 + 1));
  EXPECT_FALSE(equal(var("a", DType::Int32), var("a", DType::Int64)));
  EXPECT_FALSE(equal(make_int(1, DType::Int32), make_int(1, DType::Int64)));
  EXPECT_FALSE(equal(a, Expr()));
  EXPECT_TRUE(equal(Expr(), Expr()));
  const double nan = std::nan("");
  EXPECT_TRUE(equal(make_float(nan, DType::Float64), make_float(nan, DType::Float64)));
  EXPECT_FALSE(equal(make_float(0.0, DType::Float64), make_float(-0.0, DType::Float64)));
  EXPECT_FALSE(equal(call(Intrinsic::Exp, {make_float(1, DType::Float32)}),
                     call(Intrinsic::Log, {make_float(1, DType::Float32)})));
  EXPECT_FALSE(equal(load(DType::Float32, "x", Expr(0)), load(DType::Float32, "y", Expr(0))));

  const LoweredFunc f = small_func(), g = small_func();
  EXPECT_TRUE(equal(f.body, g.body));
  Stmt other = make_for("i", 0, var("n"), ForKind::GPUBlock, make_barrier(), 1);
  EXPECT_FALSE(equal(f.body, other));
  EXPECT_FALSE(equal(make_block_reduce(ReduceOp::Sum, "a", DType::Float32),
                     make_block_reduce(ReduceOp::Max, "a", DType::Float32)));
  EXPECT_TRUE(equal(make_barrier(), make_barrier()));
}

// Kernels that differ only in the names of their let-bound values serialize identically after
// canonical_value_names (the kernel cache key); loop variables, buffers and meaning are untouched.
TEST(CanonicalNames, LetBoundValuesAreRenumberedInBindingOrder) {
  auto kernel = [](const std::string& first, const std::string& second) {
    const Expr i = var("i");
    const Expr a = var(first, DType::Float32), b = var(second, DType::Float32);
    const Stmt body = make_let(first, load(DType::Float32, "in0", i) + make_float(1, DType::Float32),
                               make_let(second, a * make_float(2, DType::Float32), make_store("out1", i, a + b)));
    LoweredFunc f;
    f.name = "k";
    f.body = make_for("i", 0, var("n"), ForKind::Serial, body);
    return f;
  };
  const LoweredFunc f7 = kernel("v7", "v3"), f9 = kernel("v9", "v12");
  std::string s7, s9;
  serialize(f7, s7);
  serialize(f9, s9);
  EXPECT_NE(s7, s9);
  const LoweredFunc c7 = canonical_value_names(f7), c9 = canonical_value_names(f9);
  std::string t7, t9;
  serialize(c7, t7);
  serialize(c9, t9);
  EXPECT_EQ(t7, t9);
  const std::string printed = to_string(c7.body);
  EXPECT_NE(printed.find("let val0 = "), std::string::npos) << printed;
  EXPECT_NE(printed.find("let val1 = val0 * 2"), std::string::npos) << printed;
  EXPECT_NE(printed.find("out1[i] = val0 + val1"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("v7"), std::string::npos) << printed;
  // Names that are already canonical, swapped: still a bijection (val1 binds first, becomes val0).
  const LoweredFunc swapped = canonical_value_names(kernel("val1", "val0"));
  std::string ts;
  serialize(swapped, ts);
  EXPECT_EQ(ts, t7);
}

// A scheduler's name that rebinds a kernel parameter (a let "k0" over the size parameter k0) would
// hide it inside the let's scope; every scheduled kernel is renamed here, so it is refused here.
TEST(CanonicalNames, RebindingAParameterIsRefused) {
  for (const int kind : {0, 1, 2}) {
    LoweredFunc f;
    f.name = "k";
    f.params = {{"k0", ParamKind::Scalar, DType::Int64}, {"out1", ParamKind::Buffer, DType::Float32, true}};
    const Expr i = var("i");
    const Stmt store = make_store("out1", i, make_float(1, DType::Float32));
    const Stmt inner = kind == 0   ? make_let("k0", var("i") + 1, store)
                       : kind == 1 ? make_for("k0", 0, 2, ForKind::Serial, store)
                                   : make_allocate("k0", DType::Float32, 1, MemoryScope::Local, store);
    f.body = make_for("i", 0, var("k0"), ForKind::Serial, inner);
    try {
      canonical_value_names(f);
      ADD_FAILURE() << "kind " << kind << " was accepted";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("'k0' rebinds a kernel parameter"), std::string::npos) << e.what();
    }
  }
}

// Local and shared buffers named after graph values ("acc17") are renamed "loc0", ... in order of
// first allocation, in their Allocate, Load, Store and BlockReduce alike; a name allocated in both
// arms of an if keeps one name; parameters keep theirs.
TEST(CanonicalNames, AllocatedBuffersAreRenumberedInBindingOrder) {
  auto kernel = [](const std::string& acc, const std::string& shared) {
    const Expr i = var("i");
    auto arm = [&](int64_t size) {
      return make_allocate(
          acc, DType::Float32, size, MemoryScope::Local,
          make_block({make_store(acc, 0, load(DType::Float32, "in0", i)),
                      make_allocate(shared, DType::Float32, 32, MemoryScope::Shared,
                                    make_block({make_store(shared, i, load(DType::Float32, acc, 0)),
                                                make_block_reduce(ReduceOp::Sum, acc, DType::Float32)})),
                      make_store("out1", i, load(DType::Float32, acc, 0))}));
    };
    LoweredFunc f;
    f.name = "k";
    f.body = make_for("i", 0, var("n"), ForKind::Serial, make_if(var("n") > make_int(4), arm(4), arm(1)));
    return f;
  };
  std::string a, b;
  serialize(canonical_value_names(kernel("acc17", "red3")), a);
  serialize(canonical_value_names(kernel("acc40", "red9")), b);
  EXPECT_EQ(a, b);
  const LoweredFunc c = canonical_value_names(kernel("acc17", "red3"));
  const std::string printed = to_string(c.body);
  for (const char* gone : {"acc17", "red3"}) EXPECT_EQ(printed.find(gone), std::string::npos) << printed;
  EXPECT_NE(printed.find("allocate local float32 loc0[4]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("allocate local float32 loc0[1]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("loc1[i] = loc0[0]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("out1[i] = loc0[0]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("in0[i]"), std::string::npos) << printed;
  std::string renamed_twice;
  serialize(canonical_value_names(c), renamed_twice);
  EXPECT_EQ(renamed_twice, a);
}

}  // namespace
}  // namespace flow::dsl

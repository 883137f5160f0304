// Tests of the op table: torch's broadcasting and type promotion, every op's result dtype and error
// message, and every op's graph interpretation (dsl/graph_interpreter) on random inputs against a
// direct C++ formula, plus edge values (NaN, inf, -0, empty tensors, 0-dim tensors, int wrap).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "dsl/graph.h"
#include "dsl/graph_interpreter.h"
#include "dsl/op_table.h"
#include "test_util.h"

namespace flow::dsl {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using F = DType;

Attrs dims_attr(std::vector<int64_t> dims, bool keepdim = false) {
  return {{"dims", std::move(dims)}, {"keepdim", keepdim}};
}

template <class Fn>
OpError expect_op_error(Fn&& f) {
  try {
    f();
  } catch (const OpError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an OpError";
  return OpError(OpError::Kind::Value, "");
}

// One operand of a test graph: an input tensor, a 0-dim constant tensor, or a wrapped number.
struct Operand {
  TensorType type;
  std::vector<double> data;  // inputs; constants: one value
  bool constant = false;
  bool wrapped = false;
};
Operand tensor(Shape s, DType t, std::vector<double> data = {}) {
  return Operand{{std::move(s), t}, std::move(data)};
}
Operand scalar(double v, DType t = F::Float64) {
  return Operand{{{}, t}, {v}, true, true};
}
Operand zero_dim(double v, DType t) {
  return Operand{{{}, t}, {v}, true, false};
}

struct Built {
  Graph g;
  int out = -1;
  std::vector<HostTensor> inputs;
};

Built build(const std::string& op, const std::vector<Operand>& ops, const Attrs& attrs = {}) {
  Built b;
  std::vector<int> ids;
  for (const Operand& o : ops) {
    if (o.constant) {
      ids.push_back(b.g.add_constant(o.data.at(0), o.type.dtype, o.wrapped));
    } else {
      ids.push_back(b.g.add_input(o.type));
      b.inputs.push_back(HostTensor{o.type, o.data});
    }
  }
  b.out = b.g.add(op, ids, attrs);
  b.g.mark_output(b.out);
  return b;
}

TensorType out_type(const std::string& op, const std::vector<Operand>& ops, const Attrs& attrs = {}) {
  const Built b = build(op, ops, attrs);
  return b.g.value(b.out).type;
}

HostTensor run(const std::string& op, const std::vector<Operand>& ops, const Attrs& attrs = {},
               bool float64_math = false) {
  const Built b = build(op, ops, attrs);
  return interpret_graph(b.g, b.inputs, float64_math).at(0);
}

// Single-element convenience: op applied to 0-dim float32/other inputs.
double run_scalar(const std::string& op, const std::vector<std::pair<double, DType>>& xs, const Attrs& attrs = {}) {
  std::vector<Operand> ops;
  for (const auto& [v, t] : xs) ops.push_back(tensor({}, t, {v}));
  return run(op, ops, attrs).data.at(0);
}

std::vector<double> random_data(std::mt19937_64& rng, const TensorType& t, double lo, double hi) {
  std::vector<double> d(static_cast<size_t>(numel(t.shape)));
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int64_t> integer(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  for (double& x : d) {
    if (t.dtype == F::Bool) {
      x = static_cast<double>(rng() & 1);
    } else {
      x = round_to_dtype(t.dtype, is_floating(t.dtype) ? real(rng) : static_cast<double>(integer(rng)));
    }
  }
  return d;
}

Operand random_tensor(std::mt19937_64& rng, Shape s, DType t, double lo = -3, double hi = 3) {
  Operand o = tensor(std::move(s), t);
  o.data = random_data(rng, o.type, lo, hi);
  return o;
}

// The value of operand `o` at flat output index `flat` of an output of shape `out` (broadcasting).
double broadcast_at(const Operand& o, const Shape& out, int64_t flat) {
  if (o.constant) return o.data[0];
  int64_t offset = 0, stride = 1;
  for (size_t k = 0; k < o.type.shape.size(); ++k) {
    const size_t d_in = o.type.shape.size() - 1 - k, d_out = out.size() - 1 - k;
    int64_t out_stride = 1;
    for (size_t j = d_out + 1; j < out.size(); ++j) out_stride *= out[j];
    const int64_t idx = (flat / out_stride) % out[d_out];
    if (o.type.shape[d_in] != 1) offset += idx * stride;
    stride *= o.type.shape[d_in];
  }
  return o.data[static_cast<size_t>(offset)];
}

bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

// Interprets op over `ops` in both modes and compares with `formula` (evaluated in double on the
// broadcast operands, then rounded to the output dtype): float64_math tightly, the default mode within
// the output dtype's precision (ints and bools exactly).
void check_elementwise(const std::string& op, const std::vector<Operand>& ops, const Attrs& attrs,
                       const std::function<double(const std::vector<double>&)>& formula) {
  SCOPED_TRACE(op);
  for (const bool f64 : {true, false}) {
    const HostTensor out = run(op, ops, attrs, f64);
    const DType t = out.type.dtype;
    ASSERT_EQ(static_cast<int64_t>(out.data.size()), numel(out.type.shape));
    // float64_math: constants of a float32 computation are float32 (0.5, 1/sqrt(2)), hence 1e-7.
    const double rtol = !is_floating(t) ? 0 : t == F::Float64 ? 1e-12 : f64 ? 1e-7 : t == F::Float32 ? 2e-6 : 1e-2;
    for (int64_t i = 0; i < numel(out.type.shape); ++i) {
      std::vector<double> args;
      for (const Operand& o : ops) args.push_back(broadcast_at(o, out.type.shape, i));
      const double want = round_to_dtype(t, formula(args), f64);
      ASSERT_TRUE(close(out.data[i], want, rtol, rtol))
          << "element " << i << " of " << out.type.str() << ": got " << out.data[i] << ", want " << want
          << " (float64_math=" << f64 << ")";
    }
  }
}

// ---- broadcasting and promotion -----------------------------------------------------------------

TEST(Broadcast, Shapes) {
  EXPECT_EQ(broadcast_shapes({2, 3}, {3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({3, 1, 5}, {4, 1}), (Shape{3, 4, 5}));
  EXPECT_EQ(broadcast_shapes({}, {2, 2}), (Shape{2, 2}));
  EXPECT_EQ(broadcast_shapes({}, {}), (Shape{}));
  EXPECT_EQ(broadcast_shapes({0, 3}, {1, 3}), (Shape{0, 3}));
  EXPECT_EQ(broadcast_shapes({0}, {1}), (Shape{0}));
  EXPECT_EQ(broadcast_shapes({1}, {0}), (Shape{0}));
  EXPECT_EQ(out_type("add", {tensor({5, 1, 4}, F::Float32), tensor({3, 1}, F::Float32)}).shape, (Shape{5, 3, 4}));
  EXPECT_EQ(out_type("where", {tensor({2, 1}, F::Bool), tensor({3}, F::Float32), scalar(1)}).shape, (Shape{2, 3}));
}

TEST(Broadcast, ErrorsLikeTorch) {
  OpError e = expect_op_error([] { broadcast_shapes({2, 3}, {2, 4}); });
  EXPECT_EQ(e.kind, OpError::Kind::Value);
  EXPECT_STREQ(e.what(), "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1");
  e = expect_op_error([] { out_type("mul", {tensor({2, 3, 4}, F::Float32), tensor({5, 4}, F::Float32)}); });
  EXPECT_STREQ(e.what(), "The size of tensor a (3) must match the size of tensor b (5) at non-singleton dimension 1");
  e = expect_op_error([] { broadcast_shapes({0}, {2}); });
  EXPECT_STREQ(e.what(), "The size of tensor a (0) must match the size of tensor b (2) at non-singleton dimension 0");
}

TEST(Promotion, TorchResultTypeTable) {
  struct Case {
    const char* what;
    Operand a, b;
    DType want;
  };
  const Case cases[] = {
      {"int32 tensor * 2.5", tensor({3}, F::Int32), scalar(2.5), F::Float32},
      {"float16 tensor + float32 0-dim", tensor({3}, F::Float16), zero_dim(1, F::Float32), F::Float16},
      {"int32 tensor + int64 0-dim", tensor({3}, F::Int32), zero_dim(1, F::Int64), F::Int32},
      {"bool + bool", tensor({3}, F::Bool), tensor({3}, F::Bool), F::Bool},
      {"bool tensor + 1", tensor({3}, F::Bool), scalar(1, F::Int64), F::Int64},
      {"bool tensor + 1.5", tensor({3}, F::Bool), scalar(1.5), F::Float32},
      {"int32 tensor + float64 0-dim", tensor({3}, F::Int32), zero_dim(1, F::Float64), F::Float64},
      {"float16 + bfloat16", tensor({3}, F::Float16), tensor({3}, F::BFloat16), F::Float32},
      {"int32 + int64", tensor({3}, F::Int32), tensor({3}, F::Int64), F::Int64},
      {"float32 0-dim + int64 tensor", zero_dim(1, F::Float32), tensor({3}, F::Int64), F::Float32},
      {"float16 tensor + 2.5", tensor({3}, F::Float16), scalar(2.5), F::Float16},
      {"int64 0-dim + 2.5", zero_dim(1, F::Int64), scalar(2.5), F::Float32},
      {"bool 0-dim + 2", zero_dim(1, F::Bool), scalar(2, F::Int64), F::Int64},
      {"float32 tensor + float64 0-dim", tensor({3}, F::Float32), zero_dim(1, F::Float64), F::Float32},
      {"bfloat16 tensor * 2", tensor({3}, F::BFloat16), scalar(2, F::Int64), F::BFloat16},
      {"float64 0-dim + float32 0-dim", zero_dim(1, F::Float64), zero_dim(1, F::Float32), F::Float64},
      {"2.5 + True (wrapped)", scalar(2.5), scalar(1, F::Bool), F::Float32},
      {"int32 tensor + True", tensor({3}, F::Int32), scalar(1, F::Bool), F::Int32},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(out_type("add", {c.a, c.b}).dtype, c.want) << c.what;
    EXPECT_EQ(out_type("mul", {c.b, c.a}).dtype, c.want) << c.what << " (swapped)";
  }
}

TEST(Promotion, OpResultDtypes) {
  struct Case {
    const char* what;
    std::string op;
    std::vector<Operand> in;
    Attrs attrs;
    DType want;
  };
  const Operand i32 = tensor({3}, F::Int32), f16 = tensor({3}, F::Float16), b = tensor({3}, F::Bool);
  const Case cases[] = {
      {"div int/int", "div", {i32, i32}, {}, F::Float32},
      {"div int/2", "div", {i32, scalar(2, F::Int64)}, {}, F::Float32},
      {"div f16/f16", "div", {f16, f16}, {}, F::Float16},
      {"div bool/bool", "div", {b, b}, {}, F::Float32},
      {"lt int < 2.5", "lt", {i32, scalar(2.5)}, {}, F::Bool},
      {"eq f16", "eq", {f16, f16}, {}, F::Bool},
      {"pow int^2", "pow", {i32, scalar(2, F::Int64)}, {}, F::Int32},
      {"pow int^0.5", "pow", {i32, scalar(0.5)}, {}, F::Float32},
      {"minimum int32 f16", "minimum", {i32, f16}, {}, F::Float16},
      {"maximum bool bool", "maximum", {b, b}, {}, F::Bool},
      {"exp int", "exp", {i32}, {}, F::Float32},
      {"exp f16", "exp", {f16}, {}, F::Float16},
      {"sqrt bool", "sqrt", {b}, {}, F::Float32},
      {"sigmoid bool", "sigmoid", {b}, {}, F::Float32},
      {"rsqrt int64", "rsqrt", {tensor({3}, F::Int64)}, {}, F::Float32},
      {"relu int", "relu", {i32}, {}, F::Int32},
      {"abs int64", "abs", {tensor({3}, F::Int64)}, {}, F::Int64},
      {"neg int32", "neg", {i32}, {}, F::Int32},
      {"gelu bf16", "gelu", {tensor({3}, F::BFloat16)}, {}, F::BFloat16},
      {"clamp int min 0", "clamp", {i32}, {{"min", int64_t{0}}}, F::Int32},
      {"clamp int min 0.5", "clamp", {i32}, {{"min", 0.5}}, F::Float32},
      {"clamp f16 max 1", "clamp", {f16}, {{"max", 1.0}}, F::Float16},
      {"clamp bool min 0", "clamp", {b}, {{"min", int64_t{0}}}, F::Int64},
      {"where int32/2.5", "where", {b, i32, scalar(2.5)}, {}, F::Float32},
      {"where f16/f32 0-dim", "where", {b, f16, zero_dim(0, F::Float32)}, {}, F::Float16},
      {"cast bf16", "cast", {i32}, {{"dtype", std::string("bfloat16")}}, F::BFloat16},
      {"cast long", "cast", {f16}, {{"dtype", std::string("long")}}, F::Int64},
      {"sum int32", "sum", {i32}, {}, F::Int64},
      {"sum bool", "sum", {b}, {}, F::Int64},
      {"sum f16", "sum", {f16}, {}, F::Float16},
      {"sum int32 dtype float32", "sum", {i32}, {{"dtype", std::string("float32")}}, F::Float32},
      {"sum f16 dtype int32", "sum", {f16}, {{"dtype", std::string("int32")}}, F::Int32},
      {"mean f16", "mean", {f16}, {}, F::Float16},
      {"mean int32 dtype float64", "mean", {i32}, {{"dtype", std::string("float64")}}, F::Float64},
      {"amax int32", "amax", {i32}, {}, F::Int32},
      {"amin bool", "amin", {b}, {}, F::Bool},
      {"softmax f16", "softmax", {tensor({2, 3}, F::Float16)}, {{"dim", int64_t{1}}}, F::Float16},
      {"softmax int dtype f32", "softmax", {i32}, {{"dim", int64_t{0}}, {"dtype", std::string("float32")}}, F::Float32},
      {"log_softmax f64", "log_softmax", {tensor({3}, F::Float64)}, {{"dim", int64_t{-1}}}, F::Float64},
  };
  for (const Case& c : cases) EXPECT_EQ(out_type(c.op, c.in, c.attrs).dtype, c.want) << c.what;
}

TEST(Reductions, ShapesAndCanonicalDims) {
  const Operand x = tensor({2, 3, 4}, F::Float32);
  EXPECT_EQ(out_type("sum", {x}).shape, (Shape{}));
  EXPECT_EQ(out_type("sum", {x}, {{"dims", std::vector<int64_t>{}}}).shape, (Shape{}));
  EXPECT_EQ(out_type("sum", {x}, dims_attr({1})).shape, (Shape{2, 4}));
  EXPECT_EQ(out_type("mean", {x}, dims_attr({-1, 0}, true)).shape, (Shape{1, 3, 1}));
  EXPECT_EQ(out_type("amax", {x}, dims_attr({}, true)).shape, (Shape{1, 1, 1}));
  EXPECT_EQ(out_type("amin", {x}, {{"dims", int64_t{-2}}}).shape, (Shape{2, 4}));
  EXPECT_EQ(out_type("sum", {tensor({}, F::Float32)}, dims_attr({0})).shape, (Shape{}));
  EXPECT_EQ(out_type("sum", {tensor({}, F::Float32)}, dims_attr({-1}, true)).shape, (Shape{}));
  const Built b = build("sum", {x}, dims_attr({-1, 0}));
  const Attrs& a = b.g.node(b.g.value(b.out).producer).attrs;
  EXPECT_EQ(attr_ints(a, "dims", "sum"), (std::vector<int64_t>{0, 2}));
  const Built all = build("amax", {x});
  EXPECT_EQ(attr_ints(all.g.node(0).attrs, "dims", "amax"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_FALSE(attr_bool(all.g.node(0).attrs, "keepdim", "amax"));
}

// ---- error messages -----------------------------------------------------------------------------

TEST(OpErrors, MessagesAndKindsLikeTorch) {
  struct Case {
    std::string op;
    std::vector<Operand> in;
    Attrs attrs;
    OpError::Kind kind;
    std::string message;
  };
  const Operand f = tensor({2, 3}, F::Float32), i = tensor({2, 3}, F::Int64), b = tensor({2, 3}, F::Bool);
  using K = OpError::Kind;
  const Case cases[] = {
      {"sum", {f}, dims_attr({2}), K::Index, "Dimension out of range (expected to be in range of [-2, 1], but got 2)"},
      {"amax",
       {f},
       dims_attr({-3}),
       K::Index,
       "Dimension out of range (expected to be in range of [-2, 1], but got -3)"},
      {"sum",
       {tensor({}, F::Float32)},
       dims_attr({1}),
       K::Index,
       "Dimension out of range (expected to be in range of [-1, 0], but got 1)"},
      {"softmax",
       {f},
       {{"dim", int64_t{2}}},
       K::Index,
       "Dimension out of range (expected to be in range of [-2, 1], but got 2)"},
      {"sum", {f}, dims_attr({1, -1}), K::Value, "dim 1 appears multiple times in the list of dims"},
      {"mean",
       {i},
       {},
       K::Value,
       "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: "
       "Long"},
      {"mean",
       {tensor({3}, F::Int32)},
       {},
       K::Value,
       "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Int"},
      {"mean",
       {f},
       {{"dtype", std::string("int64")}},
       K::Value,
       "mean(): could not infer output dtype. Optional dtype must be either a floating point or complex dtype. Got: "
       "Long"},
      {"amax",
       {tensor({0, 3}, F::Float32)},
       dims_attr({0}),
       K::Index,
       "amax(): Expected reduction dim 0 to have non-zero size."},
      {"amin",
       {tensor({2, 0}, F::Float32)},
       dims_attr({-1}),
       K::Index,
       "amin(): Expected reduction dim 1 to have non-zero size."},
      {"amax",
       {tensor({0, 3}, F::Float32)},
       {},
       K::Value,  // torch 2.15 raises RuntimeError here (checked by tests/python/test_errors.py)
       "amax(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the "
       "'dim' argument."},
      {"amax", {f}, {{"dtype", std::string("float64")}}, K::Type, "amax(): unexpected attribute 'dtype'"},
      {"sum",
       {f},
       {{"dims", std::string("1")}},
       K::Type,
       "sum(): attribute 'dims' must be a list of ints, got a string (\"1\")"},
      {"neg",
       {b},
       {},
       K::Value,
       "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the "
       "`~` or `logical_not()` operator instead."},
      {"sub",
       {b, b},
       {},
       K::Value,
       "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
       "operator instead."},
      {"sub",
       {f, scalar(1, F::Bool)},
       {},
       K::Value,
       "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use "
       "the `~` or `logical_not()` operator instead."},
      {"relu", {b}, {}, K::Value, "Boolean inputs not supported for relu"},
      {"abs", {b}, {}, K::NotImplemented, "\"abs\" not implemented for 'Bool'"},
      {"gelu", {i}, {}, K::NotImplemented, "\"gelu\" not implemented for 'Long'"},
      {"silu", {tensor({3}, F::Int32)}, {}, K::NotImplemented, "\"silu\" not implemented for 'Int'"},
      {"pow", {b, b}, {}, K::NotImplemented, "\"pow\" not implemented for 'Bool'"},
      {"gelu",
       {f},
       {{"approximate", std::string("fast")}},
       K::Value,
       "approximate argument must be either none or tanh."},
      {"clamp", {f}, {}, K::Value, "torch.clamp: At least one of 'min' or 'max' must not be None"},
      {"clamp", {f}, {{"min", std::string("0")}}, K::Type, "clamp(): attribute 'min' must be a number"},
      {"where",
       {f, f, f},
       {},
       K::Value,
       "where expected condition to be a boolean tensor, but got a tensor with dtype Float"},
      {"where",
       {b, f, tensor({4}, F::Float32)},
       {},
       K::Value,
       "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"},
      {"cast",
       {f},
       {{"dtype", std::string("complex64")}},
       K::Type,
       "cast(): attribute 'dtype' is not a dtype: 'complex64'"},
      {"cast", {f}, {}, K::Type, "cast(): missing required attribute 'dtype'"},
      {"add",
       {i, i},
       {{"alpha", 2.0}},
       K::Value,
       "For integral input tensors, argument alpha must not be a floating point number."},
      {"add", {f, f}, {{"alpha", true}}, K::Value, "Boolean alpha only supported for Boolean results."},
      {"softmax", {i}, {{"dim", int64_t{0}}}, K::NotImplemented, "\"softmax\" not implemented for 'Long'"},
      {"log_softmax", {f}, {}, K::Type, "log_softmax(): missing required attribute 'dim'"},
      {"exp", {f}, {{"x", int64_t{1}}}, K::Type, "exp(): unexpected attribute 'x'"},
      {"where", {b, f}, {}, K::Type, "where() takes 3 input(s) but 2 were given"},
  };
  for (const Case& c : cases) {
    const OpError e = expect_op_error([&] { build(c.op, c.in, c.attrs); });
    EXPECT_EQ(e.what(), c.message) << c.op;
    EXPECT_EQ(static_cast<int>(e.kind), static_cast<int>(c.kind)) << c.op << ": " << c.message;
  }
}

// ---- interpretation against formulas --------------------------------------------------------------

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
double gelu(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Interpret, UnaryFloatOps) {
  auto rng = flow::test::rng(1);
  const Operand x = random_tensor(rng, {3, 5}, F::Float32, -4, 4);
  using V = const std::vector<double>&;
  check_elementwise("neg", {x}, {}, [](V a) { return -a[0]; });
  check_elementwise("abs", {x}, {}, [](V a) { return std::fabs(a[0]); });
  check_elementwise("exp", {x}, {}, [](V a) { return std::exp(a[0]); });
  check_elementwise("log", {x}, {}, [](V a) { return std::log(a[0]); });  // NaN for x < 0
  check_elementwise("sqrt", {x}, {}, [](V a) { return std::sqrt(a[0]); });
  check_elementwise("rsqrt", {x}, {}, [](V a) { return 1 / std::sqrt(a[0]); });
  check_elementwise("tanh", {x}, {}, [](V a) { return std::tanh(a[0]); });
  check_elementwise("sigmoid", {x}, {}, [](V a) { return sigmoid(a[0]); });
  check_elementwise("relu", {x}, {}, [](V a) { return a[0] < 0 ? 0 : a[0]; });
  check_elementwise("gelu", {x}, {}, [](V a) { return gelu(a[0]); });
  check_elementwise("gelu", {x}, {{"approximate", std::string("tanh")}}, [](V a) { return gelu_tanh(a[0]); });
  check_elementwise("silu", {x}, {}, [](V a) { return a[0] * sigmoid(a[0]); });
  check_elementwise("clamp", {x}, {{"min", -1.0}, {"max", 0.5}},
                    [](V a) { return std::min(std::max(a[0], -1.0), 0.5); });
  check_elementwise("clamp", {x}, {{"min", int64_t{1}}}, [](V a) { return std::max(a[0], 1.0); });
  check_elementwise("cast", {x}, {{"dtype", std::string("int32")}}, [](V a) { return std::trunc(a[0]); });
  check_elementwise("cast", {x}, {{"dtype", std::string("float64")}}, [](V a) { return a[0]; });
  check_elementwise("cast", {x}, {{"dtype", std::string("bool")}}, [](V a) { return a[0] != 0 ? 1.0 : 0.0; });
  // float64 inputs keep their precision.
  const Operand y = random_tensor(rng, {7}, F::Float64, 0.1, 4);
  check_elementwise("log", {y}, {}, [](V a) { return std::log(a[0]); });
  check_elementwise("gelu", {y}, {}, [](V a) { return gelu(a[0]); });
}

TEST(Interpret, UnaryOpsOnIntsAndHalves) {
  auto rng = flow::test::rng(2);
  using V = const std::vector<double>&;
  const Operand i = random_tensor(rng, {4, 3}, F::Int32, -50, 50);
  check_elementwise("neg", {i}, {}, [](V a) { return -a[0]; });
  check_elementwise("abs", {i}, {}, [](V a) { return std::fabs(a[0]); });
  check_elementwise("relu", {i}, {}, [](V a) { return std::max(a[0], 0.0); });
  check_elementwise("exp", {random_tensor(rng, {5}, F::Int64, -3, 3)}, {}, [](V a) { return std::exp(a[0]); });
  check_elementwise("sqrt", {random_tensor(rng, {5}, F::Bool)}, {}, [](V a) { return std::sqrt(a[0]); });
  check_elementwise("clamp", {i}, {{"min", int64_t{-5}}, {"max", int64_t{7}}},
                    [](V a) { return std::min(std::max(a[0], -5.0), 7.0); });
  check_elementwise("clamp", {i}, {{"max", 2.5}}, [](V a) { return std::min(a[0], 2.5); });
  check_elementwise("cast", {i}, {{"dtype", std::string("float16")}}, [](V a) { return a[0]; });
  // Halves compute in float32 and round once at the output.
  const Operand h = random_tensor(rng, {6, 2}, F::Float16, -3, 3);
  const HostTensor e = run("exp", {h});
  ASSERT_EQ(e.type.dtype, F::Float16);
  for (size_t k = 0; k < e.data.size(); ++k) {
    EXPECT_EQ(e.data[k], round_to_dtype(F::Float16, static_cast<float>(std::exp(h.data[k])))) << k;
  }
  const Operand bf = random_tensor(rng, {9}, F::BFloat16, -3, 3);
  check_elementwise("tanh", {bf}, {}, [](V a) { return std::tanh(a[0]); });
  check_elementwise("sigmoid", {bf}, {}, [](V a) { return sigmoid(a[0]); });
}

TEST(Interpret, BinaryFloatOpsWithBroadcasting) {
  auto rng = flow::test::rng(3);
  using V = const std::vector<double>&;
  const Operand a = random_tensor(rng, {2, 3, 4}, F::Float32), b = random_tensor(rng, {3, 1}, F::Float32);
  const Operand pos = random_tensor(rng, {2, 3, 4}, F::Float32, 0.25, 3);
  check_elementwise("add", {a, b}, {}, [](V v) { return v[0] + v[1]; });
  check_elementwise("add", {a, b}, {{"alpha", 2.0}}, [](V v) { return v[0] + 2 * v[1]; });
  check_elementwise("sub", {a, b}, {}, [](V v) { return v[0] - v[1]; });
  check_elementwise("sub", {b, a}, {{"alpha", -0.5}}, [](V v) { return v[0] + 0.5 * v[1]; });
  check_elementwise("mul", {a, b}, {}, [](V v) { return v[0] * v[1]; });
  check_elementwise("div", {a, b}, {}, [](V v) { return v[0] / v[1]; });
  check_elementwise("pow", {pos, b}, {}, [](V v) { return std::pow(v[0], v[1]); });
  check_elementwise("pow", {a, scalar(2, F::Int64)}, {}, [](V v) { return v[0] * v[0]; });
  check_elementwise("minimum", {a, b}, {}, [](V v) { return std::min(v[0], v[1]); });
  check_elementwise("maximum", {b, a}, {}, [](V v) { return std::max(v[0], v[1]); });
  check_elementwise("eq", {a, a}, {}, [](V v) { return v[0] == v[1]; });
  check_elementwise("ne", {a, b}, {}, [](V v) { return v[0] != v[1]; });
  check_elementwise("lt", {a, b}, {}, [](V v) { return v[0] < v[1]; });
  check_elementwise("le", {a, scalar(0.5)}, {}, [](V v) { return v[0] <= v[1]; });
  check_elementwise("gt", {zero_dim(0.25, F::Float64), a}, {}, [](V v) { return v[0] > v[1]; });
  check_elementwise("ge", {a, b}, {}, [](V v) { return v[0] >= v[1]; });
  check_elementwise("mul", {a, scalar(2.5)}, {}, [](V v) { return v[0] * 2.5; });
  const Operand cond = random_tensor(rng, {3, 4}, F::Bool);
  check_elementwise("where", {cond, a, b}, {}, [](V v) { return v[0] != 0 ? v[1] : v[2]; });
  check_elementwise("where", {cond, b, scalar(-1.5)}, {}, [](V v) { return v[0] != 0 ? v[1] : v[2]; });
  // Mixed precision: float16 with a float64 wrapped scalar stays float16.
  const Operand h = random_tensor(rng, {5}, F::Float16);
  check_elementwise("add", {h, scalar(0.1)}, {}, [](V v) { return v[0] + 0.1; });
  check_elementwise("mul", {h, random_tensor(rng, {5}, F::Float32)}, {}, [](V v) { return v[0] * v[1]; });
}

TEST(Interpret, BinaryIntAndBoolOps) {
  auto rng = flow::test::rng(4);
  using V = const std::vector<double>&;
  const Operand a = random_tensor(rng, {4, 5}, F::Int32, -20, 20), b = random_tensor(rng, {5}, F::Int32, -20, 20);
  check_elementwise("add", {a, b}, {}, [](V v) { return v[0] + v[1]; });
  check_elementwise("add", {a, b}, {{"alpha", int64_t{-3}}}, [](V v) { return v[0] - 3 * v[1]; });
  check_elementwise("sub", {a, b}, {}, [](V v) { return v[0] - v[1]; });
  check_elementwise("mul", {a, b}, {}, [](V v) { return v[0] * v[1]; });
  check_elementwise("div", {a, b}, {}, [](V v) { return v[0] / v[1]; });  // x/0 = +-inf, 0/0 = NaN
  check_elementwise("minimum", {a, b}, {}, [](V v) { return std::min(v[0], v[1]); });
  check_elementwise("maximum", {a, b}, {}, [](V v) { return std::max(v[0], v[1]); });
  check_elementwise("lt", {a, b}, {}, [](V v) { return v[0] < v[1]; });
  check_elementwise("eq", {a, b}, {}, [](V v) { return v[0] == v[1]; });
  check_elementwise("gt", {a, scalar(2.5)}, {}, [](V v) { return v[0] > v[1]; });
  check_elementwise("add", {a, tensor({5}, F::Int64, b.data)}, {}, [](V v) { return v[0] + v[1]; });
  const Operand base = random_tensor(rng, {12}, F::Int64, -5, 5), ex = random_tensor(rng, {12}, F::Int64, 0, 6);
  check_elementwise("pow", {base, ex}, {}, [](V v) { return std::pow(v[0], v[1]); });
  const Operand p = random_tensor(rng, {3, 4}, F::Bool), q = random_tensor(rng, {4}, F::Bool);
  check_elementwise("add", {p, q}, {}, [](V v) { return v[0] != 0 || v[1] != 0; });
  check_elementwise("mul", {p, q}, {}, [](V v) { return v[0] != 0 && v[1] != 0; });
  check_elementwise("maximum", {p, q}, {}, [](V v) { return std::max(v[0], v[1]); });
  check_elementwise("add", {p, scalar(2, F::Int64)}, {}, [](V v) { return v[0] + 2; });
  check_elementwise("ne", {p, q}, {}, [](V v) { return v[0] != v[1]; });
}

// Direct reduction over `dims` of a row-major [d0, d1, d2] tensor; returns values in output order.
std::vector<double> reduce_ref(const Operand& x, const std::vector<int64_t>& dims, const std::string& op) {
  const Shape& s = x.type.shape;
  std::vector<bool> red(s.size(), false);
  for (int64_t d : dims) red[d] = true;
  if (dims.empty()) red.assign(s.size(), true);
  Shape out_shape;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!red[d]) out_shape.push_back(s[d]);
  }
  const int64_t out_n = numel(out_shape);
  std::vector<double> acc(out_n, op == "amax" ? -kInf : op == "amin" ? kInf : 0.0);
  std::vector<int64_t> count(out_n, 0);
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t flat = 0; flat < numel(s); ++flat) {
    int64_t rem = flat, o = 0;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      idx[d] = rem % s[d];
      rem /= s[d];
    }
    for (size_t d = 0; d < s.size(); ++d) {
      if (!red[d]) o = o * s[d] + idx[d];
    }
    const double v = x.data[flat];
    if (op == "amax") {
      acc[o] = (std::isnan(v) || std::isnan(acc[o])) ? kNaN : std::max(acc[o], v);
    } else if (op == "amin") {
      acc[o] = (std::isnan(v) || std::isnan(acc[o])) ? kNaN : std::min(acc[o], v);
    } else {
      acc[o] += v;
    }
    ++count[o];
  }
  if (op == "mean") {
    for (int64_t o = 0; o < out_n; ++o) acc[o] /= static_cast<double>(count[o]);
  }
  return acc;
}

TEST(Interpret, ReductionsAgainstLoops) {
  auto rng = flow::test::rng(5);
  const Operand x = random_tensor(rng, {3, 4, 5}, F::Float32);
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const char* op : {"sum", "mean", "amax", "amin"}) {
    for (const auto& dims : dim_sets) {
      for (const bool keepdim : {false, true}) {
        for (const bool f64 : {true, false}) {
          SCOPED_TRACE(std::string(op) + " dims=" + shape_str(dims) + (keepdim ? " keepdim" : ""));
          const HostTensor out = run(op, {x}, dims_attr(dims, keepdim), f64);
          const std::vector<double> want = reduce_ref(x, dims, op);
          ASSERT_EQ(out.data.size(), want.size());
          EXPECT_EQ(static_cast<size_t>(out.type.shape.size()), keepdim ? 3u : 3u - (dims.empty() ? 3 : dims.size()));
          for (size_t k = 0; k < want.size(); ++k) {
            // float32 accumulation: error bounded by n * eps * sum|x| (|x| <= 3).
            const double tol = f64 ? 1e-12 : 60 * 3 * 1.2e-7;
            EXPECT_TRUE(close(out.data[k], round_to_dtype(F::Float32, want[k], f64), 1e-6, tol))
                << k << ": " << out.data[k] << " vs " << want[k];
          }
        }
      }
    }
  }
  // Integer and bool sums accumulate exactly in int64; amax/amin keep the dtype.
  const Operand big = tensor({3}, F::Int32, {2e9, 2e9, -5});
  const HostTensor s = run("sum", {big});
  EXPECT_EQ(s.type.dtype, F::Int64);
  EXPECT_EQ(s.data.at(0), 4e9 - 5);
  const Operand i = random_tensor(rng, {4, 6}, F::Int32, -100, 100);
  for (const char* op : {"sum", "amax", "amin"}) {
    const HostTensor out = run(op, {i}, dims_attr({1}));
    const std::vector<double> want = reduce_ref(i, {1}, op);
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(out.data[k], want[k]) << op << " " << k;
  }
  const Operand bools = random_tensor(rng, {5, 3}, F::Bool);
  const HostTensor bs = run("sum", {bools}, dims_attr({0}));
  const std::vector<double> bwant = reduce_ref(bools, {0}, "sum");
  for (size_t k = 0; k < bwant.size(); ++k) EXPECT_EQ(bs.data[k], bwant[k]);
  // mean of int32 with dtype=float64; sum of float16 accumulates in float32 and rounds once.
  const HostTensor m = run("mean", {i}, {{"dtype", std::string("float64")}});
  EXPECT_NEAR(m.data.at(0), reduce_ref(i, {}, "mean")[0], 1e-12);
  const Operand h = random_tensor(rng, {64}, F::Float16);
  float acc = 0;
  for (double v : h.data) acc += static_cast<float>(v);
  EXPECT_EQ(run("sum", {h}).data.at(0), round_to_dtype(F::Float16, acc));
}

TEST(Interpret, SoftmaxAndLogSoftmax) {
  auto rng = flow::test::rng(6);
  const Operand x = random_tensor(rng, {4, 7}, F::Float32, -5, 5);
  for (const int64_t dim : {0, 1, -1}) {
    const HostTensor sm = run("softmax", {x}, {{"dim", dim}});
    const HostTensor lsm = run("log_softmax", {x}, {{"dim", dim}});
    ASSERT_EQ(sm.type, x.type);
    const int64_t d = dim < 0 ? dim + 2 : dim;
    const int64_t rows = d == 1 ? 4 : 7, len = d == 1 ? 7 : 4;
    for (int64_t r = 0; r < rows; ++r) {
      const auto at = [&](int64_t k) { return d == 1 ? r * 7 + k : k * 7 + r; };
      double m = -kInf, z = 0, total = 0;
      for (int64_t k = 0; k < len; ++k) m = std::max(m, x.data[at(k)]);
      for (int64_t k = 0; k < len; ++k) z += std::exp(x.data[at(k)] - m);
      for (int64_t k = 0; k < len; ++k) {
        total += sm.data[at(k)];
        EXPECT_NEAR(sm.data[at(k)], std::exp(x.data[at(k)] - m) / z, 1e-6);
        EXPECT_NEAR(lsm.data[at(k)], x.data[at(k)] - m - std::log(z), 1e-5);
      }
      EXPECT_NEAR(total, 1.0, 1e-5) << "row " << r << " dim " << dim;
    }
  }
  // Half input: computed in float32, result float16 within half precision.
  const Operand h = random_tensor(rng, {3, 8}, F::Float16);
  const HostTensor hs = run("softmax", {h}, {{"dim", int64_t{1}}});
  const HostTensor fs = run("softmax", {tensor({3, 8}, F::Float32, h.data)}, {{"dim", int64_t{1}}});
  ASSERT_EQ(hs.type.dtype, F::Float16);
  for (size_t k = 0; k < hs.data.size(); ++k) EXPECT_EQ(hs.data[k], round_to_dtype(F::Float16, fs.data[k])) << k;
  // dtype= converts first.
  const HostTensor d64 = run("softmax", {x}, {{"dim", int64_t{1}}, {"dtype", std::string("float64")}}, true);
  EXPECT_EQ(d64.type.dtype, F::Float64);
  double row = 0;
  for (int k = 0; k < 7; ++k) row += d64.data[k];
  EXPECT_NEAR(row, 1.0, 1e-14);
}

// ---- edge cases -----------------------------------------------------------------------------------

TEST(EdgeCases, NaNInfAndSignedZero) {
  const F f = F::Float32;
  EXPECT_TRUE(std::isnan(run_scalar("relu", {{kNaN, f}})));
  EXPECT_TRUE(std::signbit(run_scalar("relu", {{-0.0, f}})));
  EXPECT_EQ(run_scalar("relu", {{-kInf, f}}), 0.0);
  EXPECT_EQ(run_scalar("relu", {{kInf, f}}), kInf);
  EXPECT_EQ(run_scalar("sigmoid", {{-kInf, f}}), 0.0);
  EXPECT_EQ(run_scalar("sigmoid", {{kInf, f}}), 1.0);
  EXPECT_EQ(run_scalar("sigmoid", {{-200, f}}), 0.0);  // exp overflows to inf in float32
  EXPECT_TRUE(std::isnan(run_scalar("sigmoid", {{kNaN, f}})));
  EXPECT_EQ(run_scalar("exp", {{-kInf, f}}), 0.0);
  EXPECT_EQ(run_scalar("exp", {{100, f}}), kInf);
  EXPECT_EQ(run_scalar("log", {{0, f}}), -kInf);
  EXPECT_TRUE(std::isnan(run_scalar("log", {{-1, f}})));
  EXPECT_TRUE(std::isnan(run_scalar("sqrt", {{-1, f}})));
  EXPECT_EQ(run_scalar("rsqrt", {{0, f}}), kInf);
  EXPECT_EQ(run_scalar("tanh", {{kInf, f}}), 1.0);
  EXPECT_EQ(run_scalar("gelu", {{kInf, f}}), kInf);
  EXPECT_EQ(run_scalar("silu", {{kInf, f}}), kInf);
  EXPECT_EQ(run_scalar("abs", {{-kInf, f}}), kInf);
  for (const char* op : {"maximum", "minimum"}) {
    EXPECT_TRUE(std::isnan(run_scalar(op, {{kNaN, f}, {1, f}}))) << op;
    EXPECT_TRUE(std::isnan(run_scalar(op, {{1, f}, {kNaN, f}}))) << op;
  }
  EXPECT_EQ(run_scalar("maximum", {{-kInf, f}, {3, f}}), 3.0);
  EXPECT_TRUE(std::isnan(run_scalar("clamp", {{kNaN, f}}, {{"min", 0.0}, {"max", 1.0}})));
  EXPECT_EQ(run_scalar("clamp", {{0.5, f}}, {{"min", 2.0}, {"max", 1.0}}), 1.0);  // min > max gives max
  EXPECT_EQ(run_scalar("clamp", {{kInf, f}}, {{"max", 1.0}}), 1.0);
  EXPECT_EQ(run_scalar("div", {{1, f}, {0, f}}), kInf);
  EXPECT_EQ(run_scalar("div", {{-1, f}, {0, f}}), -kInf);
  EXPECT_TRUE(std::isnan(run_scalar("div", {{0, f}, {0, f}})));
  EXPECT_EQ(run_scalar("div", {{7, F::Int32}, {2, F::Int32}}), 3.5);
  EXPECT_EQ(run_scalar("div", {{1, F::Int64}, {0, F::Int64}}), kInf);
  EXPECT_EQ(run_scalar("eq", {{kNaN, f}, {kNaN, f}}), 0.0);
  EXPECT_EQ(run_scalar("ne", {{kNaN, f}, {kNaN, f}}), 1.0);
  EXPECT_EQ(run_scalar("lt", {{kNaN, f}, {1, f}}), 0.0);
  EXPECT_EQ(run_scalar("ge", {{kInf, f}, {kInf, f}}), 1.0);
  EXPECT_EQ(run_scalar("pow", {{0, f}, {0, f}}), 1.0);
  EXPECT_TRUE(std::isnan(run_scalar("pow", {{-8, f}, {1.0 / 3, f}})));
  // Softmax of a row of -inf is NaN, as in torch; a finite row next to it is unaffected.
  const HostTensor sm = run("softmax", {tensor({2, 2}, f, {-kInf, -kInf, 0, 0})}, {{"dim", int64_t{1}}});
  EXPECT_TRUE(std::isnan(sm.data[0]) && std::isnan(sm.data[1]));
  EXPECT_EQ(sm.data[2], 0.5);
  const HostTensor lsm = run("log_softmax", {tensor({2}, f, {-kInf, -kInf})}, {{"dim", int64_t{0}}});
  EXPECT_TRUE(std::isnan(lsm.data[0]));
  const HostTensor part = run("softmax", {tensor({3}, f, {-kInf, 1, 1})}, {{"dim", int64_t{0}}});
  EXPECT_EQ(part.data, (std::vector<double>{0, 0.5, 0.5}));
  // amax/amin propagate NaN; sum does too.
  const Operand withnan = tensor({4}, f, {1, kNaN, 3, -kInf});
  EXPECT_TRUE(std::isnan(run("amax", {withnan}).data[0]));
  EXPECT_TRUE(std::isnan(run("amin", {withnan}).data[0]));
  EXPECT_TRUE(std::isnan(run("sum", {withnan}).data[0]));
  EXPECT_EQ(run("amax", {tensor({2}, f, {-kInf, -kInf})}).data[0], -kInf);
}

TEST(EdgeCases, IntegerSemantics) {
  const F i32 = F::Int32;
  EXPECT_EQ(run_scalar("add", {{2147483647, i32}, {1, i32}}), -2147483648.0);  // wraps
  EXPECT_EQ(run_scalar("mul", {{65536, i32}, {65536, i32}}), 0.0);
  EXPECT_EQ(run_scalar("neg", {{-2147483648.0, i32}}), -2147483648.0);
  EXPECT_EQ(run_scalar("pow", {{2, i32}, {-1, i32}}), 0.0);
  EXPECT_EQ(run_scalar("pow", {{1, i32}, {-5, i32}}), 1.0);
  EXPECT_EQ(run_scalar("pow", {{-1, i32}, {-3, i32}}), -1.0);
  EXPECT_EQ(run_scalar("pow", {{-1, i32}, {-2, i32}}), 1.0);
  EXPECT_EQ(run_scalar("pow", {{3, i32}, {4, i32}}), 81.0);
  EXPECT_EQ(run_scalar("cast", {{2.7, F::Float32}}, {{"dtype", std::string("int32")}}), 2.0);
  EXPECT_EQ(run_scalar("cast", {{-2.7, F::Float32}}, {{"dtype", std::string("int64")}}), -2.0);
  EXPECT_EQ(run_scalar("cast", {{0.5, F::Float32}}, {{"dtype", std::string("bool")}}), 1.0);
  EXPECT_EQ(run_scalar("cast", {{kNaN, F::Float32}}, {{"dtype", std::string("bool")}}), 1.0);
  EXPECT_EQ(run_scalar("cast", {{-0.0, F::Float32}}, {{"dtype", std::string("bool")}}), 0.0);
  EXPECT_EQ(run_scalar("cast", {{2049, i32}}, {{"dtype", std::string("float16")}}), 2048.0);  // round to even
  EXPECT_EQ(run_scalar("cast", {{3e9, F::Int64}}, {{"dtype", std::string("int32")}}), 3e9 - 4294967296.0);
  // Comparisons happen in the promoted type: with a wrapped float, int32 compares in float32
  // (16777217 rounds to 16777216), with a float64 0-dim tensor in float64.
  EXPECT_EQ(run("eq", {tensor({1}, i32, {16777217}), scalar(16777216.0)}).data[0], 1.0);
  EXPECT_EQ(run("eq", {tensor({1}, i32, {16777217}), zero_dim(16777216.0, F::Float64)}).data[0], 0.0);
  EXPECT_EQ(run("mul", {tensor({2}, i32, {3, -4}), scalar(2.5)}).data, (std::vector<double>{7.5, -10}));
  EXPECT_EQ(run("add", {tensor({2}, i32, {3, -4}), zero_dim(5, F::Int64)}).data, (std::vector<double>{8, 1}));
}

TEST(EdgeCases, EmptyAndZeroDimTensors) {
  const F f = F::Float32;
  const Operand empty = tensor({0, 3}, f);
  const HostTensor a = run("add", {empty, tensor({3}, f, {1, 2, 3})});
  EXPECT_EQ(a.type.shape, (Shape{0, 3}));
  EXPECT_TRUE(a.data.empty());
  EXPECT_EQ(run("exp", {empty}).type.shape, (Shape{0, 3}));
  const HostTensor s = run("sum", {empty}, dims_attr({0}));
  EXPECT_EQ(s.type.shape, (Shape{3}));
  EXPECT_EQ(s.data, (std::vector<double>{0, 0, 0}));
  const HostTensor m = run("mean", {empty}, dims_attr({0}));
  EXPECT_TRUE(std::isnan(m.data.at(0)));
  EXPECT_EQ(run("sum", {empty}).data, (std::vector<double>{0}));
  const HostTensor mx = run("amax", {empty}, dims_attr({1}, true));
  EXPECT_EQ(mx.type.shape, (Shape{0, 1}));
  EXPECT_TRUE(mx.data.empty());
  const HostTensor sm = run("softmax", {empty}, {{"dim", int64_t{0}}});
  EXPECT_EQ(sm.type.shape, (Shape{0, 3}));
  EXPECT_EQ(run("log_softmax", {empty}, {{"dim", int64_t{1}}}).type.shape, (Shape{0, 3}));
  // 0-dim tensors.
  const Operand z = tensor({}, f, {-1.5});
  EXPECT_EQ(run("abs", {z}).data, (std::vector<double>{1.5}));
  const HostTensor zs = run("sum", {z}, dims_attr({0}, true));
  EXPECT_EQ(zs.type.shape, (Shape{}));
  EXPECT_EQ(zs.data, (std::vector<double>{-1.5}));
  EXPECT_EQ(run("mean", {z}).data, (std::vector<double>{-1.5}));
  EXPECT_EQ(run("amin", {z}, dims_attr({-1})).data, (std::vector<double>{-1.5}));
  EXPECT_EQ(run("softmax", {z}, {{"dim", int64_t{0}}}).data, (std::vector<double>{1.0}));
  EXPECT_EQ(run("log_softmax", {z}, {{"dim", int64_t{-1}}}).data, (std::vector<double>{0.0}));
  const HostTensor bz = run("add", {z, tensor({3}, f, {1, 2, 3})});
  EXPECT_EQ(bz.data, (std::vector<double>{-0.5, 0.5, 1.5}));
  EXPECT_EQ(run("mul", {zero_dim(2, F::Int64), zero_dim(3, F::Int64)}).data, (std::vector<double>{6}));
}

TEST(Interpret, RejectsMismatchedInputs) {
  Graph g;
  const int x = g.add_input({{2}, F::Float32});
  g.mark_output(g.add("exp", {x}));
  EXPECT_THROW(interpret_graph(g, {}), std::invalid_argument);
  EXPECT_THROW(interpret_graph(g, {HostTensor{{{3}, F::Float32}, {1, 2, 3}}}), std::invalid_argument);
  EXPECT_THROW(interpret_graph(g, {HostTensor{{{2}, F::Float32}, {1}}}), std::invalid_argument);
  EXPECT_THROW(interpret_graph(g, {HostTensor{{{2}, F::Float64}, {1, 2}}}), std::invalid_argument);
  // Inputs are rounded to their dtype on entry.
  EXPECT_EQ(interpret_graph(g, {HostTensor{{{2}, F::Float32}, {0.1, 0}}}).at(0).data[1], 1.0);
  Graph h;
  const int i = h.add_input({{1}, F::Int32});
  h.mark_output(i);
  EXPECT_EQ(interpret_graph(h, {HostTensor{{{1}, F::Int32}, {2.9}}}).at(0).data[0], 2.0);
}

TEST(Interpret, MultiOpGraphSharesIntermediates) {
  // y = softmax(x * w + b) summed over rows; checks composition and reuse of a value by two ops.
  auto rng = flow::test::rng(7);
  const Operand x = random_tensor(rng, {3, 4}, F::Float32), w = random_tensor(rng, {4}, F::Float32);
  Graph g;
  const int xi = g.add_input(x.type), wi = g.add_input(w.type);
  const int xw = g.add("mul", {xi, wi});
  const int t = g.add("tanh", {xw});
  const int u = g.add("add", {xw, t});
  const int sm = g.add("softmax", {u}, {{"dim", int64_t{1}}});
  const int s = g.add("sum", {sm}, dims_attr({1}));
  g.mark_output(s);
  g.mark_output(u);
  EXPECT_EQ(g.consumers(xw), (std::vector<int>{1, 2}));
  const std::vector<HostTensor> out =
      interpret_graph(g, {HostTensor{x.type, x.data}, HostTensor{w.type, w.data}}, true);
  ASSERT_EQ(out.size(), 2u);
  for (double v : out[0].data) EXPECT_NEAR(v, 1.0, 1e-12);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) {
      const double p = x.data[r * 4 + c] * w.data[c];
      EXPECT_NEAR(out[1].data[r * 4 + c], p + std::tanh(p), 1e-12);
    }
  }
}

}  // namespace
}  // namespace flow::dsl

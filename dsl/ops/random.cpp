// Note: counter-based random numbers, so a random tensor is a pure function of (seed, element
// index) and generates inside any kernel (fused into its consumer: dropout's mask is computed where
// it is used, never stored) identically on the CPU, the GPU and the reference interpreter, eagerly
// and under @flow.jit. The caller advances the seed (flow's generator state is a 0-dim int64 tensor
// that each draw increments, so a compiled function draws new numbers on every call).
//
// The hash uses only int64 add, multiply and remainder by the Mersenne prime P = 2^31 - 1 (the IR
// had no bitwise ops when it was written; changing it now would change every stream), with every
// product below 2^62: two rounds of a multiplicative step and a squaring, mixing in the index and
// the seed. It is not torch's Philox stream (flow.rand never
// matched torch's numbers either); its output passes the uniformity and independence checks of the
// tests, which is what dropout needs, not a cryptographic or statistical-grade generator.
#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

constexpr int64_t kP = 2147483647;  // 2^31 - 1

Expr mod_p(Expr x) {
  return x % make_int(kP);
}

}  // namespace

void register_random_ops() {
  // rand_uniform(seed): float32 of attr "shape", uniform in [0, 1); `seed` a 0-dim int64 tensor.
  OpDef d;
  d.name = "rand_uniform";
  d.pattern = OpPattern::Injective;
  d.num_inputs = 1;
  d.infer = [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    check_attrs("rand_uniform", a, {"shape"});
    const TensorType& s = g.value(in.at(0)).type;
    if (s.dtype != DType::Int64 || !s.shape.empty())
      throw OpError(OpError::Kind::Value, "rand_uniform(): the seed must be a 0-dim int64 tensor");
    TensorType t;
    t.shape = attr_ints(a, "shape", "rand_uniform");
    for (int64_t n : t.shape)
      if (n < 0) throw OpError(OpError::Kind::Value, "rand_uniform(): negative size in the shape");
    t.dtype = DType::Float32;
    return std::vector<TensorType>{t};
  };
  d.injective = [](const std::vector<Expr>& oi, const InputLoader& load, const OpContext& ctx) {
    const Shape& shape = ctx.outputs[0].shape;
    Expr flat = make_int(0);
    for (size_t k = 0; k < oi.size(); ++k) flat = flat * make_int(shape[k]) + oi[k];
    const Expr s = mod_p(cast(DType::Int64, load(0, {})));
    const Expr x0 = mod_p(flat);
    const Expr x1 = mod_p(x0 * make_int(48271) + s * make_int(16807) + make_int(12345));
    const Expr x2 = mod_p(x1 * x1 + make_int(1013904223));
    const Expr x3 = mod_p(x2 * make_int(69621) + s * make_int(40692) + x0);
    const Expr x4 = mod_p(x3 * x3 + x1 + make_int(7));
    // x4 / P in float64 is in [0, 1); rounding to float32 can give exactly 1.0 for the largest
    // values, so clamp below 1 as torch.rand's contract says.
    const Expr u = cast(DType::Float64, x4) * make_float(1.0 / static_cast<double>(kP), DType::Float64);
    return min(cast(DType::Float32, u), make_float(0.99999994, DType::Float32));
  };
  register_builtin(std::move(d));
}

}  // namespace flow::dsl

#include "dsl/ops/moments.h"

namespace flow::dsl {

Moments row_moments(Graph& g, int xf, const Attrs& red, int64_t count) {
  const int first = g.add("mean", {xf}, red);
  const int d = g.add("sub", {xf, first});
  const int shift = g.add("mean", {d}, red);
  const int squares = g.add("sum", {g.add("mul", {d, d})}, red);
  const int n = g.add_constant(static_cast<double>(count), DType::Float64, /*wrapped_number=*/true);
  // Rounding can leave sum(d^2) a hair below n * mean(d)^2 for a constant row; relu keeps NaN.
  const int m2 = g.add("relu", {g.add("sub", {squares, g.add("mul", {g.add("mul", {shift, shift}), n})})});
  // An infinite first mean makes every d (and the shift) NaN: the mean is then m1 itself, as the
  // plain mean's (torch: var_mean of [1, inf] has mean inf).
  const int mean = g.add("where", {g.add("isfinite", {shift}), g.add("add", {first, shift}), first});
  return {mean, g.add("sub", {d, shift}), m2};
}

}  // namespace flow::dsl

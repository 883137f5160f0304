// Note: the mean and the sum of squared deviations of rows, for var/std and the normalizations, by
// the corrected two-pass algorithm (Chan, Golub and LeVeque): a first mean m1; the deviations
// d = x - m1; then, from d, both sum(d) and sum(d^2) (two reductions of one kernel):
//     mean = m1 + mean(d),  x - mean = d - mean(d),  M2 = sum(d^2) - n * mean(d)^2.
// The plain two-pass form (mean, then sum((x - mean)^2)) carries the first mean's rounding error into
// every deviation: the float32 mean of 4096 copies of 1000.1 is 2.4e-3 off, and layer_norm's
// rsqrt(var + eps) scaled that to outputs of 0.6 where torch's are 0. mean(d) adds values near 0,
// so its error is relative to the rows' spread, not to their offset.
#pragma once
#include <cstdint>

#include "dsl/graph.h"

namespace flow::dsl {

struct Moments {
  int mean;      // keepdim
  int centered;  // x - mean, x's shape
  int m2;        // sum of squared deviations, keepdim, >= 0
};

// xf floating; `red` the reduction's attrs ("dims", "keepdim" true); `count` the elements per row.
Moments row_moments(Graph& g, int xf, const Attrs& red, int64_t count);

}  // namespace flow::dsl

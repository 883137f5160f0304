// The indexing of cuDNN's convolution contract (runtime/cudnn.h, ConvProblem), 2-D or 3-D, for the
// tests' CPU references (test_cudnn.cpp against the library, test_cuda_library_plan.cpp against
// the plans flow builds): where an element of x or y lies through the problem's strides, where a
// filter tap lies in KCTRS or KTRSC order, and which taps of an output position land inside the
// input. A 2-D problem is the 3-D one of depth 1 with one depth tap.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/cudnn.h"

namespace flow::test {

// The element offset of (n, c, depth, h, w) through a problem's strides (a 2-D problem's four have
// no depth; its depth index is always 0).
inline int64_t conv_offset(const std::vector<int64_t>& st, int64_t n, int64_t c, int64_t z, int64_t h, int64_t w) {
  const size_t hi = st.size() - 2;
  return n * st[0] + c * st[1] + (st.size() == 5 ? z * st[2] : 0) + h * st[hi] + w * st[hi + 1];
}

// Filter tap (t, r, s) of output channel k and input channel ci of its group: KCTRS, or KTRSC when
// the filter is channels-last (w_nhwc).
inline int64_t conv_filter_offset(const runtime::cuda::cudnn::ConvProblem& p, int64_t k, int64_t ci, int64_t t,
                                  int64_t r, int64_t s) {
  const int64_t cg = p.c / p.groups;
  return p.w_nhwc ? (((k * p.t + t) * p.r + r) * p.s + s) * cg + ci : (((k * cg + ci) * p.t + t) * p.r + r) * p.s + s;
}

// Calls f(t, r, s, iz, ih, iw) for each filter tap of output position (oz, oh, ow) that lands inside
// the input, at input position (iz, ih, iw).
template <typename F>
void for_each_conv_tap(const runtime::cuda::cudnn::ConvProblem& p, int64_t oz, int64_t oh, int64_t ow, F f) {
  for (int64_t t = 0; t < p.t; ++t)
    for (int64_t r = 0; r < p.r; ++r)
      for (int64_t s = 0; s < p.s; ++s) {
        const int64_t iz = oz * p.stride_d - p.pad_d + t * p.dil_d;
        const int64_t ih = oh * p.stride_h - p.pad_h + r * p.dil_h;
        const int64_t iw = ow * p.stride_w - p.pad_w + s * p.dil_w;
        if (iz < 0 || ih < 0 || iw < 0 || iz >= p.d || ih >= p.h || iw >= p.w) continue;
        f(t, r, s, iz, ih, iw);
      }
}

}  // namespace flow::test

// Note: folding a per-channel scale and shift into the convolution before it (DESIGN.md §2,
// "fold constants (BN into conv)"), a conv2d or (CPU) conv3d; transposed ones keep their scale. An eval-mode batch norm decomposes into
//     y = conv2d(x, W [, b]) * s + t        (s, t: one value per output channel, or one value)
// and when s and t are frozen (computed from parameters only, scheduler/frozen.h) this pass rewrites
// it as
//     y = conv2d(x, W * s, b * s + t)
// The multiply moves from the activation (N*C*H*W elements, every call) to the weights (C*K*R*S
// elements, computed once and cached by the executable), and the shift becomes the convolution's
// own bias, which oneDNN adds in its output loop. A lone "* s" or "+ t" folds the same way. The
// result differs from the unfolded graph by float rounding only (the products are reassociated), as
// in torch.fx's fuse_conv_bn_eval and TVM's FoldScaleAxis.
//
// The conv output must have no other reader and not be a graph output, the operands must have the
// output's dtype, and an add must have alpha 1.
//
// Mixed precision (dsl/autocast.h): a half conv whose batch norm computes in float32 reads
//     y = cast<half>(cast<float32>(conv2d(x, cast<half>(W) [, cast<half>(b)])) * s + t)
// and folds to conv2d(x, cast<half>(W * s), cast<half>(b * s + t)): the scale meets the float32
// weights before their one rounding to half, as torch.fx's fuse_conv_bn_eval followed by autocast
// would compute them. The result differs from the unfolded graph by one half rounding of the
// output (the unfolded graph rounds the conv output, then the normalized value).
#pragma once
#include <vector>

#include "dsl/graph.h"

namespace flow::sched {

struct FoldResult {
  dsl::Graph graph;  // the rewritten graph; left empty when nothing folds (folded == 0)
  int folded = 0;    // convolutions that absorbed a scale and/or a shift
};

// `frozen` per value of `g` (scheduler/frozen.h). Graph inputs keep their order and names; the
// outputs keep their order.
FoldResult fold_scale_into_conv(const dsl::Graph& g, const std::vector<bool>& frozen);

}  // namespace flow::sched

// Note: channels-last layout propagation for convolutions (DESIGN.md §2, the layout pass): float32
// and half convolutions on the CPU (oneDNN), half-precision ones on CUDA (cuDNN's tensor cores take
// NHWC), transposed convolutions on CUDA too.
//
// oneDNN's fast CPU convolutions (brgconv, brgconv_1x1) work on NHWC activations. With NCHW
// tensors between them, every convolution reordered its input to NHWC and its output back (ResNet-50
// at batch 8: 37 ms of reorders per forward) and 1x1 convolutions ran as NCHW GEMMs, 10-60% slower
// than on NHWC. This pass keeps activations NHWC between convolutions without changing any
// kernel's contract (each writes a fresh contiguous tensor): it rewrites the graph so that
//   - a 4-D conv2d (float32 or half on the CPU) produces its result in NHWC order ([N, OH, OW, C], attribute
//     channels_last), and the NCHW value the graph had is a permute view of it;
//   - the ops between convolutions run on the NHWC values directly: elementwise ops whose full-size
//     operands are all NHWC (smaller ones, a per-channel bias or a scalar, are read through a
//     permuted view), constant pads of a 4-D NHWC value, and slices of one (max pooling reads its
//     windows so);
//   - a cast read only by NHWC convolutions (autocast's cast of the input image) writes NHWC: the
//     remaining NCHW -> NHWC transposition happens inside that kernel, as a transposing read;
//   - a convolution reading an NHWC value gets the NCHW permute view, whose strides oneDNN reads as
//     NHWC without a reorder.
// Every other reader keeps reading the NCHW view, so the rewrite is an identity whatever it
// reaches: each step is a permute moved past an op that commutes with it. A convolution whose
// result an elementwise op would still read in NCHW stays NCHW (that op would lose the post-op
// fusion and read its input transposed); the decision is iterated to a fixed point.
#pragma once
#include <vector>

#include "dsl/graph.h"
#include "dsl/stmt.h"

namespace flow::sched {

struct ChannelsLastResult {
  dsl::Graph graph;      // empty when nothing changed
  int convolutions = 0;  // conv2d (and, on CUDA, conv_transpose2d) nodes that now produce NHWC
  int ops = 0;           // elementwise, pad and slice nodes moved to NHWC
};

// `target` picks the convolutions that go NHWC: float32 and half ones on the CPU (oneDNN),
// float16/bfloat16 ones on CUDA (cuDNN's tensor cores); none without `convolutions` (no library to
// run them). Channels-last data seeds the pass too, as torch's memory-format propagation does:
// the graph inputs marked in `nhwc_inputs` (dense NHWC buffers: the caller knows their strides),
// and in-graph permutes of an [N, H, W, C] value to NCHW. The ops after them run on the NHWC values
// (a max pool's taps read channels innermost) and a graph output computed so is returned as the
// NCHW view of NHWC data: channels-last, as torch returns it.
ChannelsLastResult to_channels_last(const dsl::Graph& g, dsl::Target target = dsl::Target::CPU,
                                    std::vector<bool> nhwc_inputs = {}, bool convolutions = true);

}  // namespace flow::sched

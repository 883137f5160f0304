// Note: folding a zero pad into the convolution that reads it (DESIGN.md §2, the constant-folding
// pass; the torch-API issue asks for it). `conv2d(pad(x, [l, r, t, b], 0), W)` becomes
// `conv2d(x, W)` with `t, l` added to its padding and `b, r` to its end padding: oneDNN pads on the
// fly, so the padded copy of the activation is never written. conv3d the same over three spatial
// dims (a causal video convolution's one-sided time pad, say). Only zero pads of the spatial dims
// with no negative amount (a crop) fold; the pad node stays when something else reads it.
//
// Under autocast the conv reads cast(pad(x)); the fold looks through the cast (a cast of zero is
// zero) and the conv reads cast(x). On CUDA only folds that leave the padding symmetric are made:
// cuDNN's convolution takes one padding per side pair, and an asymmetric one is run by padding a
// copy of the input (jit/cuda_library_ops.cpp), which the pad kernel, fused into its producer, does
// better.
//
// One difference: with inf or NaN in the weights, torch's conv2d(pad(x)) multiplies the pad zeros by
// them (NaN on the border) while the folded convolution skips padded taps (finite border), which is
// what torch's own conv2d(x, padding=...) does. Finite weights give identical results.
#pragma once
#include "dsl/graph.h"
#include "dsl/stmt.h"

namespace flow::sched {

struct PadFoldResult {
  dsl::Graph graph;  // the rewritten graph; left empty when nothing folds (folded == 0)
  int folded = 0;    // convolutions that absorbed a pad
};

// Graph inputs keep their order and names; the outputs keep their order.
PadFoldResult fold_pad_into_conv(const dsl::Graph& g, dsl::Target target = dsl::Target::CPU);

}  // namespace flow::sched

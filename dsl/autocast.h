// Note: automatic mixed precision (autocast), as torch.autocast defines it: matrix products and
// convolutions run in a lower-precision float type, a list of precision-sensitive ops (exp, log,
// softmax, the norms, sums, ...) run in float32, and every other op runs in the dtype its inputs
// promote to. The lists are per device type, as torch's are (on the CPU torch keeps softmax and
// layer_norm in the lower type; on CUDA it runs them in float32), and live in one place:
// autocast_class() in autocast.cpp.
//
// Where it runs: while a graph is built. A Graph with an autocast policy (Graph::set_autocast)
// casts the inputs of each op the caller adds, before the op is recorded, by the op's class. It
// must run there rather than over the finished graph because composite ops (softmax, layer_norm,
// group_norm, logsumexp) are decomposed into primitives as they are added: a pass over the
// finished graph could no longer tell a softmax's exp from a user's exp, and the two are in
// different lists. Only ops added from outside (a trace) are cast; the primitives a composite
// expands into follow the dtype of the composite's (already cast) inputs. The result is an
// ordinary graph with explicit cast nodes, so every later pass (folds, layouts, fusion) and the
// serialized graph see the casts.
//
// Like torch, a lower-precision op casts every floating input that is not float64 (float32, and
// the other half type) to the autocast dtype; a float32-list op casts float16/bfloat16 inputs to
// float32; integer and bool inputs are never cast.
#pragma once
#include <string>
#include <vector>

#include "dsl/types.h"

namespace flow::dsl {

class Graph;

enum class AutocastDevice { CPU, CUDA };
enum class AutocastClass {
  LowerPrecision,  // conv2d, conv_transpose2d, matmul, linear: inputs cast to the autocast dtype
  Float32,         // precision-sensitive ops of the device's list: half inputs cast to float32
  Promote,         // ops of two or more floats (dot on CUDA): every input cast to the widest of them
  None,            // run in the promoted dtype of the inputs
};

struct AutocastPolicy {
  DType dtype = DType::Float16;  // float16 or bfloat16
  AutocastDevice device = AutocastDevice::CUDA;
};

AutocastDevice autocast_device_from_name(const std::string& name);  // "cpu" | "cuda"; throws invalid_argument
const char* autocast_class_name(AutocastClass c);
// The class of `op` under autocast on `device` (torch's lists, restricted to flow's ops).
AutocastClass autocast_class(const std::string& op, AutocastDevice device);
// The inputs `op` should be added with under `policy`: each input that the op's class casts is
// replaced by a cast of it (Graph::autocast_cast: one cast per value and dtype, shared by every
// op that needs it); the others are returned as they are.
std::vector<int> autocast_inputs(Graph& g, const std::string& op, const std::vector<int>& inputs,
                                 const AutocastPolicy& policy);

}  // namespace flow::dsl

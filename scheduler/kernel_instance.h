// Note: a fused group specialized to the layouts of its actual arguments. Dims are reordered
// (kept dims first, then reduced dims), size-1 dims dropped and adjacent dims merged when every
// buffer is contiguous across them, so most kernels become rank 1 or 2. What remains is classified
// per buffer and dim as stride 0 (broadcast), 1 (contiguous) or dynamic; sizes and dynamic
// strides become scalar kernel parameters, so one compiled kernel serves every shape with the
// same classification (that is what eager mode caches on). One exception: a stride of 2 to 4
// elements along the innermost dim of a pointwise group (interleaved data: RGB pixels, complex
// pairs, the channels of a channels-last view read in NCHW order) is kept as a constant
// (StrideClass::Small), so a CPU vector loop reads it with one contiguous load and a shuffle
// instead of a gather. And a shape-specialized kernel (a compiled graph's, or a group with an
// injective op, whose index arithmetic holds its sizes) compiles in what it may.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "scheduler/fusion.h"

namespace flow::sched {

enum class StrideClass : uint8_t { Zero, One, Dynamic, Small };

inline constexpr int64_t kMaxSmallStride = 4;

struct KernelBuffer {
  int value = -1;
  std::string name;  // parameter name in the kernel
  dsl::DType dtype = dsl::DType::Float32;
  bool is_output = false;
  std::vector<int64_t> strides;  // per coalesced dim: kept dims, then reduced dims
  std::vector<StrideClass> classes;
  // Inputs of injective ops are read at computed indices of their own dims: their actual strides
  // (constants in shape-specialized kernels, else parameters). Empty for other buffers.
  std::vector<int64_t> own_strides;
};

// Element strides of each group input and output as passed at run time (contiguous if absent).
using GroupLayouts = std::map<int, std::vector<int64_t>>;

struct KernelInstance {
  const dsl::Graph* graph = nullptr;
  const FusionGroup* group = nullptr;
  std::vector<int64_t> kept;          // coalesced kept sizes (at least one dim for pointwise)
  std::vector<int64_t> reduced;       // coalesced reduced sizes (reduction groups)
  std::vector<KernelBuffer> buffers;  // group inputs (non-constant) then outputs
  std::vector<int> scalar_constants;  // constant values passed as scalar params (not inlined)
  bool inline_constants = true;
  // Whether this kernel serves only these sizes and layouts, so they may be compiled in: a compiled
  // graph's (its guards fix both) or a group with an injective op (its index arithmetic holds the
  // sizes as constants; eager plans key on sizes and strides). Otherwise one kernel serves every
  // shape with the same stride classes.
  bool shape_specialized = true;

  int64_t rows() const;      // product of kept sizes
  int64_t row_size() const;  // product of reduced sizes
  const KernelBuffer* buffer_for(int value) const;
};

std::vector<int64_t> contiguous_strides(const dsl::Shape& shape);

// Throws std::invalid_argument if a layout has the wrong rank.
KernelInstance specialize(const dsl::Graph& g, const FusionGroup& grp, const GroupLayouts& layouts,
                          bool inline_constants);

}  // namespace flow::sched

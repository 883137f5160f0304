#include "runtime/embedding_bag_kernel.h"

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>

#include "runtime/device_error.h"

namespace flow::runtime::cuda {

const std::string& embedding_bag_kernel_source() {
  static const std::string source = fixed_kernel_prelude() + R"(// flow: embedding_bag (runtime/embedding_bag_kernel.h)
struct flow_embedding_bag_params {
  long long bags, dim, positions, rows, padding_idx, mode, per_sample_weights;
};
enum { FLOW_EB_SUM = 0, FLOW_EB_MEAN = 1, FLOW_EB_MAX = 2 };

__device__ __forceinline__ double flow_eb_load(double x) { return x; }
template <class T> __device__ __forceinline__ float flow_eb_load(T x) { return flow_to_float(x); }
__device__ __forceinline__ void flow_eb_store(double* p, double x) { *p = x; }
template <class T> __device__ __forceinline__ void flow_eb_store(T* p, float x) { flow_store(p, x); }

// T: the element type; A: the accumulator (float, or double for double).
template <class T, class A>
__device__ __forceinline__ void flow_embedding_bag(T* out, const long long* indices, const T* weight,
                                                   const long long* offsets, const T* psw,
                                                   const flow_embedding_bag_params& p, long long* err) {
  for (long long b = blockIdx.x; b < p.bags; b += gridDim.x) {
    long long begin = offsets[b], end = offsets[b + 1];
    if (threadIdx.x == 0) {  // torch's checks of the boundaries, reported (the bag is clamped)
      if (b == 0 && begin != 0) flow_report_error(err, 2, 0, begin, p.positions);
      if (end > p.positions || end < begin) flow_report_error(err, 2, b + 1, end, p.positions);
    }
    begin = begin < 0 ? 0 : (begin > p.positions ? p.positions : begin);
    end = end < begin ? begin : (end > p.positions ? p.positions : end);
    for (long long c = threadIdx.x; c < p.dim; c += blockDim.x) {
      A acc = 0;
      long long counted = 0;
      for (long long i = begin; i < end; ++i) {
        const long long ix = indices[i];
        if (ix < 0 || ix >= p.rows) {
          if (c == 0) flow_report_error(err, 1, i, ix, p.rows);  // (thread 0's first column: once per position)
          continue;
        }
        if (ix == p.padding_idx) continue;
        const A v = flow_eb_load(weight[ix * p.dim + c]);
        if (p.mode == FLOW_EB_MAX) {
          if (counted == 0 || v > acc) acc = v;  // torch's order: a later NaN never wins
        } else if (p.per_sample_weights) {
          acc += flow_eb_load(psw[i]) * v;
        } else {
          acc += v;
        }
        ++counted;
      }
      if (p.mode == FLOW_EB_MEAN && counted > 0) acc = acc / (A)counted;
      flow_eb_store(out + b * p.dim + c, acc);
    }
  }
}

#define FLOW_EMBEDDING_BAG_ENTRY(NAME, T, A)                                                                   \
  extern "C" __global__ void flow_embedding_bag_##NAME(T* out, const long long* indices, const T* weight,      \
                                                       const long long* offsets, const T* psw,                 \
                                                       flow_embedding_bag_params p, long long* err) {          \
    flow_embedding_bag<T, A>(out, indices, weight, offsets, psw, p, err);                                      \
  }
FLOW_EMBEDDING_BAG_ENTRY(f32, float, float)
FLOW_EMBEDDING_BAG_ENTRY(f64, double, double)
FLOW_EMBEDDING_BAG_ENTRY(f16, flow_f16, float)
FLOW_EMBEDDING_BAG_ENTRY(bf16, flow_bf16, float)
)";
  return source;
}

namespace {

const char* type_suffix(FixedKernelType t) {
  if (t != FixedKernelType::Float32 && t != FixedKernelType::Float64 && t != FixedKernelType::Float16 &&
      t != FixedKernelType::BFloat16)
    throw std::invalid_argument("flow: embedding_bag takes floating-point weights only");
  return fixed_kernel_suffix(t);
}

constexpr long long kMaxBlocks = 65535;  // the kernel loops over the rest of the bags (grid-stride)
constexpr long long kMaxThreads = 256;

}  // namespace

EmbeddingBagParams embedding_bag_params(const EmbeddingBagShape& shape) {
  EmbeddingBagParams p{};
  p.bags = shape.bags;
  p.dim = shape.dim;
  p.positions = shape.positions;
  p.rows = shape.rows;
  p.padding_idx = shape.padding_idx;
  p.mode = static_cast<long long>(shape.mode);
  p.per_sample_weights = shape.per_sample_weights ? 1 : 0;
  return p;
}

std::vector<EmbeddingBagLaunch> plan_embedding_bag(FixedKernelType type, const EmbeddingBagShape& shape) {
  const std::string suffix = type_suffix(type);
  if (shape.bags <= 0 || shape.dim <= 0) return {};
  // A warp's worth of columns at least; up to 256 threads, each looping over the rest of the row.
  const long long threads = std::min(kMaxThreads, (static_cast<long long>(shape.dim) + 31) / 32 * 32);
  const long long blocks = std::min<long long>(kMaxBlocks, shape.bags);
  return {{"flow_embedding_bag_" + suffix, static_cast<unsigned>(blocks), static_cast<unsigned>(threads)}};
}

void embedding_bag(FixedKernelType type, void* out, const int64_t* indices, const void* weight, const int64_t* offsets,
                   const void* per_sample_weights, const EmbeddingBagShape& shape, Stream stream) {
  const std::vector<EmbeddingBagLaunch> plan = plan_embedding_bag(type, shape);
  if (plan.empty()) return;  // before touching the device
  const DeviceProps& props = device_props(current_device());
  const std::shared_ptr<const CudaModule> module =
      CudaModule::get("flow_embedding_bag/" + props.arch,
                      fixed_kernel_cubin("flow_embedding_bag", embedding_bag_kernel_source(), props.arch));
  EmbeddingBagParams p = embedding_bag_params(shape);
  const void* indices_ptr = indices;
  const void* offsets_ptr = offsets;
  long long* err = device_error_word(current_device(), stream);
  for (const EmbeddingBagLaunch& l : plan) {
    std::array<void*, 7> params = {&out, &indices_ptr, &weight, &offsets_ptr, &per_sample_weights, &p, &err};
    launch(module->function(l.entry), {l.blocks, 1, 1}, {l.threads, 1, 1}, 0, stream, params.data(), "embedding_bag");
  }
}

}  // namespace flow::runtime::cuda

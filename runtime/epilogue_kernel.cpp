#include "runtime/epilogue_kernel.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "runtime/nvrtc.h"

namespace flow::runtime::cuda {

const std::string& epilogue_kernel_source() {
  static const std::string source = R"(// flow: bias + activation after a library call (runtime/epilogue_kernel.h)
struct flow_f16 { unsigned short bits; };
struct flow_bf16 { unsigned short bits; };

__device__ __forceinline__ float flow_to_float(float x) { return x; }
__device__ __forceinline__ float flow_to_float(flow_f16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ __forceinline__ float flow_to_float(flow_bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }

__device__ __forceinline__ void flow_store(float* p, float x) { *p = x; }
__device__ __forceinline__ void flow_store(flow_f16* p, float x) {
  unsigned short b;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x));
  p->bits = b;
}
__device__ __forceinline__ void flow_store(flow_bf16* p, float x) {
  // Round to nearest even in integers (cvt.rn.bf16.f32 needs sm_80); NaN stays a quiet NaN.
  const unsigned u = __float_as_uint(x);
  p->bits = (x != x) ? (unsigned short)((u >> 16) | 0x40u) : (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// act: 0 none, 1 relu (NaN propagates, as torch's), 2 GELU, tanh approximation.
template <class T>
__device__ __forceinline__ void flow_epilogue(T* out, const T* bias, int act, int bias_per_row, long long batch,
                                              long long rows, long long cols, long long row_stride,
                                              long long batch_stride) {
  const long long total = batch * rows * cols;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    const long long c = i % cols;
    const long long br = i / cols;
    const long long r = br % rows;
    T* p = out + (br / rows) * batch_stride + r * row_stride + c;
    float v = flow_to_float(*p);
    if (bias) v += flow_to_float(bias[bias_per_row ? r : c]);
    if (act == 1) {
      v = (v > 0.f || v != v) ? v : 0.f;
    } else if (act == 2) {
      v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
    flow_store(p, v);
  }
}

#define FLOW_EPILOGUE_ENTRY(name, T)                                                                           \
  extern "C" __global__ void name(T* out, const T* bias, int act, int bias_per_row, long long batch,           \
                                  long long rows, long long cols, long long row_stride, long long batch_stride) { \
    flow_epilogue(out, bias, act, bias_per_row, batch, rows, cols, row_stride, batch_stride);                 \
  }
FLOW_EPILOGUE_ENTRY(flow_epilogue_f32, float)
FLOW_EPILOGUE_ENTRY(flow_epilogue_f16, flow_f16)
FLOW_EPILOGUE_ENTRY(flow_epilogue_bf16, flow_bf16)
)";
  return source;
}

const char* epilogue_kernel_name(DataType type) {
  switch (type) {
    case DataType::Float32:
      return "flow_epilogue_f32";
    case DataType::Float16:
      return "flow_epilogue_f16";
    case DataType::BFloat16:
      return "flow_epilogue_bf16";
  }
  throw std::logic_error("flow: epilogue kernel: unknown data type");
}

namespace {

// The kernels compiled for `arch`, once per process (CudaModule::get then loads them once per
// device).
const std::string& cubin_for(const std::string& arch) {
  static std::mutex mu;
  static auto* cubins = new std::map<std::string, std::string>();  // never destroyed, like the modules
  std::lock_guard<std::mutex> lock(mu);
  auto it = cubins->find(arch);
  if (it == cubins->end())
    it = cubins->emplace(arch, nvrtc_compile(epilogue_kernel_source(), "flow_epilogue", arch, {}, {}).cubin).first;
  return it->second;
}

}  // namespace

void apply_bias_activation(DataType type, EpilogueActivation activation, const void* bias, void* out,
                           const EpilogueShape& shape, Stream stream) {
  const long long total = shape.batch * shape.rows * shape.cols;
  if (total == 0 || (bias == nullptr && activation == EpilogueActivation::None)) return;
  const DeviceProps& props = device_props(current_device());
  const std::shared_ptr<const CudaModule> module =
      CudaModule::get("flow_epilogue/" + props.arch, cubin_for(props.arch));
  const Function f = module->function(epilogue_kernel_name(type));
  constexpr unsigned kThreads = 256;
  const long long blocks_needed = (total + kThreads - 1) / kThreads;
  const unsigned blocks =
      static_cast<unsigned>(std::min<long long>(blocks_needed, static_cast<long long>(props.sm_count) * 8));
  int act = activation == EpilogueActivation::Relu ? 1 : activation == EpilogueActivation::GeluTanh ? 2 : 0;
  int bias_per_row = shape.bias_per_row ? 1 : 0;
  void* out_arg = out;
  const void* bias_arg = bias;
  long long batch = shape.batch, rows = shape.rows, cols = shape.cols;
  long long row_stride = shape.row_stride, batch_stride = shape.batch_stride;
  std::array<void*, 9> params = {&out_arg, &bias_arg, &act,        &bias_per_row, &batch,
                                 &rows,    &cols,     &row_stride, &batch_stride};
  launch(f, {blocks, 1, 1}, {kThreads, 1, 1}, 0, stream, params.data(), "bias + activation epilogue");
}

}  // namespace flow::runtime::cuda

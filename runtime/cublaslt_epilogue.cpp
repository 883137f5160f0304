#include "runtime/cublaslt_epilogue.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "runtime/nvrtc.h"

namespace flow::runtime::cuda::cublaslt {

const std::string& split_epilogue_source() {
  static const std::string source = R"(// flow: the split epilogue of a cuBLASLt matmul (runtime/cublaslt_epilogue.h)
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
__device__ __forceinline__ void flow_epilogue(T* out, const T* bias, int act, long long batch, long long m,
                                              long long n, long long out_row, long long out_batch) {
  const long long total = batch * m * n;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
    const long long col = i % n;
    const long long rows = i / n;
    T* p = out + (rows / m) * out_batch + (rows % m) * out_row + col;
    float v = flow_to_float(*p);
    if (bias) v += flow_to_float(bias[col]);
    if (act == 1) {
      v = (v > 0.f || v != v) ? v : 0.f;
    } else if (act == 2) {
      v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
    flow_store(p, v);
  }
}

extern "C" __global__ void flow_lt_epilogue_f32(float* out, const float* bias, int act, long long batch, long long m,
                                                long long n, long long out_row, long long out_batch) {
  flow_epilogue(out, bias, act, batch, m, n, out_row, out_batch);
}
extern "C" __global__ void flow_lt_epilogue_f16(flow_f16* out, const flow_f16* bias, int act, long long batch,
                                                long long m, long long n, long long out_row, long long out_batch) {
  flow_epilogue(out, bias, act, batch, m, n, out_row, out_batch);
}
extern "C" __global__ void flow_lt_epilogue_bf16(flow_bf16* out, const flow_bf16* bias, int act, long long batch,
                                                 long long m, long long n, long long out_row, long long out_batch) {
  flow_epilogue(out, bias, act, batch, m, n, out_row, out_batch);
}
)";
  return source;
}

const char* split_epilogue_kernel_name(DataType out_type) {
  switch (out_type) {
    case DataType::Float32:
      return "flow_lt_epilogue_f32";
    case DataType::Float16:
      return "flow_lt_epilogue_f16";
    case DataType::BFloat16:
      return "flow_lt_epilogue_bf16";
  }
  throw std::logic_error("flow: cuBLASLt split epilogue: unknown data type");
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
    it = cubins
             ->emplace(arch, nvrtc_compile(split_epilogue_source(), "flow_cublaslt_split_epilogue", arch, {}, {}).cubin)
             .first;
  return it->second;
}

}  // namespace

void apply_split_epilogue(DataType out_type, Activation activation, const void* bias, void* out, int64_t batch,
                          int64_t m, int64_t n, int64_t out_row, int64_t out_batch, Stream stream) {
  const long long total = batch * m * n;
  if (total == 0 || (bias == nullptr && activation == Activation::None)) return;
  const int device = current_device();
  const DeviceProps& props = device_props(device);
  const std::string key = "flow_cublaslt_split_epilogue/" + props.arch;
  const std::shared_ptr<const CudaModule> module = CudaModule::get(key, cubin_for(props.arch));
  const Function f = module->function(split_epilogue_kernel_name(out_type));
  constexpr unsigned kThreads = 256;
  const long long blocks_needed = (total + kThreads - 1) / kThreads;
  const unsigned blocks =
      static_cast<unsigned>(std::min<long long>(blocks_needed, static_cast<long long>(props.sm_count) * 8));
  int act = activation == Activation::Relu ? 1 : activation == Activation::GeluTanh ? 2 : 0;
  void* out_arg = out;
  const void* bias_arg = bias;
  long long b = batch, rows = m, cols = n, row_stride = out_row, batch_stride = out_batch;
  std::array<void*, 8> params = {&out_arg, &bias_arg, &act, &b, &rows, &cols, &row_stride, &batch_stride};
  launch(f, {blocks, 1, 1}, {kThreads, 1, 1}, 0, stream, params.data(), "cuBLASLt split epilogue");
}

}  // namespace flow::runtime::cuda::cublaslt

#include "runtime/epilogue_kernel.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "runtime/fixed_kernel.h"

namespace flow::runtime::cuda {

const std::string& epilogue_kernel_source() {
  static const std::string source =
      fixed_kernel_prelude() + R"(// flow: bias + activation after a library call (runtime/epilogue_kernel.h)

// Vectors of V elements along a row, loaded and stored whole (16 bytes when V * sizeof(T) == 16).
template <class T, int V>
struct __align__(sizeof(T) * V) flow_vec {
  T v[V];
};
#ifdef FLOW_SIMT_HOST
#define FLOW_CHECK_ALIGNED(p) flow_simt_check_aligned(p, sizeof(*(p)))  // a flow_vec: size == alignment
#else
#define FLOW_CHECK_ALIGNED(p)
#endif

// act: 0 none, 1 relu (as torch's: NaN and -0 pass through), 2 GELU, tanh approximation. I is the index
// type: 32-bit when every offset fits (integer division is much cheaper), else 64-bit. The host
// checked that V divides cols and both strides and that out (and a per-column bias) is aligned.
template <class I, class T, int V>
__device__ __forceinline__ void flow_epilogue_loop(T* out, const T* bias, int act, int bias_per_row, I batch, I rows,
                                                   I cols, I row_stride, I batch_stride) {
  const I vcols = cols / V;
  const I total = batch * rows * vcols;
  const I step = (I)gridDim.x * blockDim.x;
  for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += step) {
    const I c = (j % vcols) * V;
    const I br = j / vcols;
    const I r = br % rows;
    flow_vec<T, V>* p = reinterpret_cast<flow_vec<T, V>*>(out + (br / rows) * batch_stride + r * row_stride + c);
    FLOW_CHECK_ALIGNED(p);
    flow_vec<T, V> x = *p;
    flow_vec<T, V> b;
    if (bias) {
      if (bias_per_row) {
#pragma unroll
        for (int k = 0; k < V; ++k) b.v[k] = bias[r];
      } else {
        const flow_vec<T, V>* pb = reinterpret_cast<const flow_vec<T, V>*>(bias + c);
        FLOW_CHECK_ALIGNED(pb);
        b = *pb;
      }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float v = flow_to_float(x.v[k]);
      if (bias) v += flow_to_float(b.v[k]);  // (no "+ 0" without a bias: it would turn -0 into +0)
      if (act == 1) {
        v = v < 0.f ? 0.f : v;
      } else if (act == 2) {
        v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
      }
      flow_store(&x.v[k], v);
    }
    *p = x;
  }
}

#define FLOW_EPILOGUE_ENTRY(name, T, V)                                                                        \
  extern "C" __global__ void name(T* out, const T* bias, int act, int bias_per_row, int narrow, long long batch, \
                                  long long rows, long long cols, long long row_stride, long long batch_stride) { \
    if (narrow)                                                                                                \
      flow_epilogue_loop<unsigned, T, V>(out, bias, act, bias_per_row, (unsigned)batch, (unsigned)rows,         \
                                         (unsigned)cols, (unsigned)row_stride, (unsigned)batch_stride);         \
    else                                                                                                       \
      flow_epilogue_loop<unsigned long long, T, V>(out, bias, act, bias_per_row, batch, rows, cols, row_stride, \
                                                   batch_stride);                                              \
  }
FLOW_EPILOGUE_ENTRY(flow_epilogue_f32, float, 1)
FLOW_EPILOGUE_ENTRY(flow_epilogue_f32_v4, float, 4)
FLOW_EPILOGUE_ENTRY(flow_epilogue_f16, flow_f16, 1)
FLOW_EPILOGUE_ENTRY(flow_epilogue_f16_v8, flow_f16, 8)
FLOW_EPILOGUE_ENTRY(flow_epilogue_bf16, flow_bf16, 1)
FLOW_EPILOGUE_ENTRY(flow_epilogue_bf16_v8, flow_bf16, 8)
)";
  return source;
}

const char* epilogue_kernel_name(DataType type, bool vector) {
  switch (type) {
    case DataType::Float32:
      return vector ? "flow_epilogue_f32_v4" : "flow_epilogue_f32";
    case DataType::Float16:
      return vector ? "flow_epilogue_f16_v8" : "flow_epilogue_f16";
    case DataType::BFloat16:
      return vector ? "flow_epilogue_bf16_v8" : "flow_epilogue_bf16";
  }
  throw std::logic_error("flow: epilogue kernel: unknown data type");
}

int epilogue_vector_width(DataType type, const void* bias, const void* out, const EpilogueShape& s) {
  const int v = static_cast<int>(16 / data_type_size(type));
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool fits = s.cols % v == 0 && (s.rows <= 1 || s.row_stride % v == 0) &&
                    (s.batch <= 1 || s.batch_stride % v == 0) && aligned(out) &&
                    (bias == nullptr || s.bias_per_row || aligned(bias));
  return fits ? v : 1;
}

namespace {

bool nothing_to_do(EpilogueActivation activation, const void* bias, const EpilogueShape& shape) {
  return shape.batch * shape.rows * shape.cols == 0 || (bias == nullptr && activation == EpilogueActivation::None);
}

}  // namespace

EpilogueLaunch plan_epilogue_launch(DataType type, EpilogueActivation activation, const void* bias, const void* out,
                                    const EpilogueShape& shape, int sm_count) {
  EpilogueLaunch l;
  if (nothing_to_do(activation, bias, shape)) return l;
  const long long total = shape.batch * shape.rows * shape.cols;
  const int width = epilogue_vector_width(type, bias, out, shape);
  l.entry = epilogue_kernel_name(type, width > 1);
  l.threads = 256;
  const long long vectors = total / width;
  const long long blocks_needed = (vectors + l.threads - 1) / l.threads;
  l.blocks = static_cast<unsigned>(std::min<long long>(blocks_needed, static_cast<long long>(sm_count) * 8));
  // 32-bit indexing when the largest offset fits in it, and so does the loop counter one grid
  // stride past the last vector (where it stops; it must not wrap around).
  const long long reach = (shape.batch - 1) * shape.batch_stride + (shape.rows - 1) * shape.row_stride + shape.cols;
  const long long counter_end = vectors + static_cast<long long>(l.blocks) * l.threads;
  l.narrow = std::max({total, reach, counter_end}) < (1LL << 32) ? 1 : 0;
  l.act = activation == EpilogueActivation::Relu ? 1 : activation == EpilogueActivation::GeluTanh ? 2 : 0;
  l.bias_per_row = shape.bias_per_row ? 1 : 0;
  l.batch = shape.batch;
  l.rows = shape.rows;
  l.cols = shape.cols;
  l.row_stride = shape.row_stride;
  l.batch_stride = shape.batch_stride;
  return l;
}

void apply_bias_activation(DataType type, EpilogueActivation activation, const void* bias, void* out,
                           const EpilogueShape& shape, Stream stream) {
  if (nothing_to_do(activation, bias, shape)) return;  // before touching the device
  const DeviceProps& props = device_props(current_device());
  EpilogueLaunch l = plan_epilogue_launch(type, activation, bias, out, shape, props.sm_count);
  if (!l.entry) return;
  const std::shared_ptr<const CudaModule> module = CudaModule::get(
      "flow_epilogue/" + props.arch, fixed_kernel_cubin("flow_epilogue", epilogue_kernel_source(), props.arch));
  const Function f = module->function(l.entry);
  void* out_arg = out;
  const void* bias_arg = bias;
  std::array<void*, 10> params = {&out_arg, &bias_arg, &l.act,  &l.bias_per_row, &l.narrow,
                                  &l.batch, &l.rows,   &l.cols, &l.row_stride,   &l.batch_stride};
  launch(f, {l.blocks, 1, 1}, {l.threads, 1, 1}, 0, stream, params.data(), "bias + activation epilogue");
}

}  // namespace flow::runtime::cuda

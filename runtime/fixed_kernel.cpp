#include "runtime/fixed_kernel.h"

#include <map>
#include <mutex>
#include <utility>

#include "runtime/nvrtc.h"

namespace flow::runtime::cuda {

const char* fixed_kernel_suffix(FixedKernelType t) {
  switch (t) {
    case FixedKernelType::Float32:
      return "f32";
    case FixedKernelType::Float16:
      return "f16";
    case FixedKernelType::BFloat16:
      return "bf16";
    case FixedKernelType::Float64:
      return "f64";
    case FixedKernelType::Int32:
      return "i32";
    case FixedKernelType::Int64:
      return "i64";
    case FixedKernelType::Bool:
      return "b8";
  }
  return "?";
}

const std::string& fixed_kernel_prelude() {
  static const std::string prelude = R"(// flow: the fixed kernels' prelude (runtime/fixed_kernel.h)
struct flow_f16 { unsigned short bits; };
struct flow_bf16 { unsigned short bits; };

__device__ __forceinline__ float flow_to_float(float x) { return x; }
__device__ __forceinline__ float flow_to_float(flow_f16 h) {
#ifdef FLOW_SIMT_HOST  // the tests' host SIMT emulator (tests/cpp/simt)
  return flow_simt_f16_to_f32(h.bits);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
#endif
}
__device__ __forceinline__ float flow_to_float(flow_bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }

__device__ __forceinline__ void flow_store(float* p, float x) { *p = x; }
// A NaN keeps its sign and leading payload bits, or gets the quiet bit where none survive: the rule
// of the generated kernels (jit/cuda/flow_helpers.cuh), the interpreter and the CPU; the PTX
// conversions would write the canonical NaN.
__device__ __forceinline__ unsigned short flow_nan_to_small(unsigned u, unsigned mant_bits) {
  const unsigned payload = (u & 0x7fffffu) >> (23 - mant_bits);
  const unsigned exp_ones = mant_bits == 10 ? 0x7c00u : 0x7f80u;
  return (unsigned short)(((u >> 16) & 0x8000u) | exp_ones | (payload ? payload : 1u << (mant_bits - 1)));
}
__device__ __forceinline__ void flow_store(flow_f16* p, float x) {
  if (x != x) {
    p->bits = flow_nan_to_small(__float_as_uint(x), 10);
    return;
  }
#ifdef FLOW_SIMT_HOST
  p->bits = flow_simt_f32_to_f16(x);
#else
  unsigned short b;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x));
  p->bits = b;
#endif
}
__device__ __forceinline__ void flow_store(flow_bf16* p, float x) {
  // Round to nearest even in integers (cvt.rn.bf16.f32 needs sm_80).
  const unsigned u = __float_as_uint(x);
  p->bits = (x != x) ? flow_nan_to_small(u, 7) : (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Reports what a kernel cannot raise into the device's error word (runtime/device_error.h): the
// first report wins the atomicCAS on the code; a null word (captured before it existed) drops it.
__device__ __forceinline__ void flow_report_error(long long* err, long long code, long long a, long long b,
                                                  long long c) {
  if (err && atomicCAS((unsigned long long*)err, 0ull, (unsigned long long)code) == 0ull) {
    err[1] = a;
    err[2] = b;
    err[3] = c;
  }
}
)";
  return prelude;
}

const std::string& fixed_kernel_cubin(const std::string& name, const std::string& source, const std::string& arch) {
  static std::mutex mu;
  // Never destroyed, like the modules loaded from them.
  static auto* cubins = new std::map<std::pair<std::string, std::string>, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cubins->find({name, arch});
  if (it == cubins->end())
    it = cubins->emplace(std::make_pair(name, arch), nvrtc_compile(source, name, arch, {}, {}).cubin).first;
  return it->second;
}

}  // namespace flow::runtime::cuda

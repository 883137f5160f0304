// The emulated device's libcublasLt (see emulated_driver.cpp): the entry points flow uses
// (runtime/cublaslt.cpp's FLOW_LT_FUNCTIONS), implemented on the host from cuBLASLt's documented
// semantics, independently of flow's own row-major to column-major mapping, which is what this
// checks:
//  - layouts are column-major (rows, cols, ld), with BATCH_COUNT and STRIDED_BATCH_OFFSET;
//  - D = alpha * op(A) op(B) + beta * C, then the epilogue: bias (one value per row of D, in the
//    type BIAS_DATA_TYPE names), then ReLU or GELU (tanh form), rounded once into D's type;
//  - attribute sizes, operand shapes and types, the alignment the preference promised, and that
//    every operand lies inside live device memory are all checked, as the real library's
//    kernels would fault on them.
// The product runs in double on the host, in stream order through the emulated driver.
#include <cublasLt.h>
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "simt/emulated_driver_hooks.h"
#include "simt/emulated_handles.h"
#include "simt/emulated_values.h"

namespace {

using flow::test::simt::drop_handle;
using flow::test::simt::emulated_driver;
using flow::test::simt::load_value;
using flow::test::simt::make_handle;
using flow::test::simt::store_value;
using flow::test::simt::value_bytes;
using flow::test::simt::ValueType;

ValueType value_type(cudaDataType t) {
  switch (t) {
    case CUDA_R_32F:
      return ValueType::F32;
    case CUDA_R_16F:
      return ValueType::F16;
    case CUDA_R_16BF:
      return ValueType::BF16;
    default:
      return ValueType::Unsupported;
  }
}

struct Layout {
  cudaDataType type{};
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batch_stride = 0;
  int32_t order = CUBLASLT_ORDER_COL;
};

struct Desc {
  cublasComputeType_t compute{};
  cudaDataType scale{};
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type
};

struct Preference {
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

struct Handle {
  int tag = 0;
};

cublasStatus_t fail(cublasStatus_t s, const std::string& why) {
  std::fprintf(stderr, "[emulated cublasLt] %s\n", why.c_str());
  return s;
}

template <typename T>
bool read_attr(const void* buf, size_t size, T* out) {
  if (size != sizeof(T)) return false;
  std::memcpy(out, buf, sizeof(T));
  return true;
}

// The last element's offset + 1 of a layout, in elements.
// The largest power of two up to 16 dividing the address (16 for null: nothing to read).
uint64_t pointer_alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint64_t align = 16;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

int64_t extent(const Layout& l) {
  if (l.rows == 0 || l.cols == 0) return 0;
  return static_cast<int64_t>(l.batch - 1) * l.batch_stride + static_cast<int64_t>(l.cols - 1) * l.ld +
         static_cast<int64_t>(l.rows);
}

// Shapes, types and attributes of one problem; empty when valid.
std::string validate(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dl) {
  if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F)
    return "only CUBLAS_COMPUTE_32F with float scales is emulated";
  for (const Layout* l : {&a, &b, &c, &dl}) {
    if (value_type(l->type) == ValueType::Unsupported) return "a layout has a data type the emulation lacks";
    if (l->order != CUBLASLT_ORDER_COL) return "only column-major layouts are emulated";
    if (l->ld < static_cast<int64_t>(l->rows) || l->ld < 1) return "a layout's ld is smaller than its rows";
    if (l->batch != a.batch) return "layouts disagree on BATCH_COUNT";
  }
  if (a.type != b.type) return "A and B have different types";
  if (c.type != dl.type || c.rows != dl.rows || c.cols != dl.cols) return "C and D differ in type or shape";
  const uint64_t m = d.transa == CUBLAS_OP_N ? a.rows : a.cols;
  const uint64_t ka = d.transa == CUBLAS_OP_N ? a.cols : a.rows;
  const uint64_t kb = d.transb == CUBLAS_OP_N ? b.rows : b.cols;
  const uint64_t n = d.transb == CUBLAS_OP_N ? b.cols : b.rows;
  if (ka != kb) return "op(A) and op(B) disagree on k (" + std::to_string(ka) + " vs " + std::to_string(kb) + ")";
  if (dl.rows != m || dl.cols != n)
    return "D is " + std::to_string(dl.rows) + "x" + std::to_string(dl.cols) + ", op(A) op(B) is " + std::to_string(m) +
           "x" + std::to_string(n);
  const uint32_t e = d.epilogue;
  if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_RELU &&
      e != CUBLASLT_EPILOGUE_RELU_BIAS && e != CUBLASLT_EPILOGUE_GELU && e != CUBLASLT_EPILOGUE_GELU_BIAS)
    return "an epilogue the emulation lacks";
  if ((e & CUBLASLT_EPILOGUE_BIAS) && d.bias_type != -1 && d.bias_type != static_cast<int32_t>(dl.type))
    return "a bias type other than D's";
  return {};
}

struct Call {
  Desc d;
  Layout a, b, c, dl;
  const void *pa, *pb, *pc;
  void* pd;
  float alpha, beta;
};

int run(void* arg) {
  const Call& k = *static_cast<const Call*>(arg);
  const ValueType ta = value_type(k.a.type), tc = value_type(k.c.type);
  const auto m = static_cast<int64_t>(k.dl.rows), n = static_cast<int64_t>(k.dl.cols);
  const auto kk = static_cast<int64_t>(k.d.transa == CUBLAS_OP_N ? k.a.cols : k.a.rows);
  const uint32_t e = k.d.epilogue;
  // Row-major copies of op(A) (m x k), op(B) (k x n) and the result (m x n), so the i-p-j loop
  // runs over contiguous memory.
  std::vector<double> opa(static_cast<size_t>(m * kk)), opb(static_cast<size_t>(kk * n)),
      acc(static_cast<size_t>(m * n));
  for (int32_t bi = 0; bi < k.a.batch; ++bi) {
    const int64_t oa = bi * k.a.batch_stride, ob = bi * k.b.batch_stride, oc = bi * k.c.batch_stride,
                  od = bi * k.dl.batch_stride;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < kk; ++p)
        opa[static_cast<size_t>(i * kk + p)] =
            load_value(ta, k.pa, oa + (k.d.transa == CUBLAS_OP_N ? i + p * k.a.ld : p + i * k.a.ld));
    for (int64_t p = 0; p < kk; ++p)
      for (int64_t j = 0; j < n; ++j)
        opb[static_cast<size_t>(p * n + j)] =
            load_value(ta, k.pb, ob + (k.d.transb == CUBLAS_OP_N ? p + j * k.b.ld : j + p * k.b.ld));
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t i = 0; i < m; ++i) {
      double* row = acc.data() + i * n;
      for (int64_t p = 0; p < kk; ++p) {
        const double av = opa[static_cast<size_t>(i * kk + p)];
        const double* brow = opb.data() + p * n;
        for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double v = k.alpha * acc[static_cast<size_t>(i * n + j)];
        if (k.beta != 0) v += k.beta * load_value(tc, k.pc, oc + i + j * k.c.ld);
        if (e & CUBLASLT_EPILOGUE_BIAS) v += load_value(tc, k.d.bias, i);
        if ((e & ~CUBLASLT_EPILOGUE_BIAS) == CUBLASLT_EPILOGUE_RELU) v = v > 0 ? v : 0;
        if ((e & ~CUBLASLT_EPILOGUE_BIAS) == CUBLASLT_EPILOGUE_GELU)
          v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        store_value(tc, k.pd, od + i + j * k.dl.ld, v);
      }
    }
  }
  return 0;
}

}  // namespace

extern "C" {

size_t CUBLASWINAPI cublasLtGetVersion(void) {
  return CUBLAS_VERSION;
}

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    default:
      return "CUBLAS_STATUS_(other)";
  }
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t) {
  return "(emulated cuBLASLt; the reason is on stderr)";
}

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* h) {
  if (!emulated_driver().enqueue) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "the emulated driver is not loaded");
  make_handle<Handle>(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                                     cudaDataType_t scale) {
  auto d = std::make_unique<Desc>();
  d->compute = compute;
  d->scale = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d.release());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  drop_handle<Desc>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                           cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                           size_t size) {
  Desc& d = *reinterpret_cast<Desc*>(desc);
  bool ok = false;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      ok = read_attr(buf, size, &d.transa);
      break;
    case CUBLASLT_MATMUL_DESC_TRANSB:
      ok = read_attr(buf, size, &d.transb);
      break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      ok = read_attr(buf, size, &d.epilogue);
      break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      ok = read_attr(buf, size, &d.bias);
      break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      ok = read_attr(buf, size, &d.bias_type);
      break;
    default:
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, "matmul attribute " + std::to_string(attr) + " not emulated");
  }
  return ok ? CUBLAS_STATUS_SUCCESS
            : fail(CUBLAS_STATUS_INVALID_VALUE, "matmul attribute " + std::to_string(attr) + " of the wrong size");
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  auto l = std::make_unique<Layout>();
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(l.release());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  drop_handle<Layout>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                             cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                             size_t size) {
  Layout& l = *reinterpret_cast<Layout*>(layout);
  bool ok = false;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      ok = read_attr(buf, size, &l.batch) && l.batch >= 1;
      break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      ok = read_attr(buf, size, &l.batch_stride);
      break;
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      ok = read_attr(buf, size, &l.order);
      break;
    default:
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, "layout attribute " + std::to_string(attr) + " not emulated");
  }
  return ok ? CUBLAS_STATUS_SUCCESS
            : fail(CUBLAS_STATUS_INVALID_VALUE, "layout attribute " + std::to_string(attr) + ": bad size or value");
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  make_handle<Preference>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  drop_handle<Preference>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void* buf, size_t size) {
  Preference& p = *reinterpret_cast<Preference*>(pref);
  bool ok = false;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      ok = read_attr(buf, size, &p.workspace);
      break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      ok = read_attr(buf, size, &p.align[0]);
      break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      ok = read_attr(buf, size, &p.align[1]);
      break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      ok = read_attr(buf, size, &p.align[2]);
      break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      ok = read_attr(buf, size, &p.align[3]);
      break;
    default:
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, "preference " + std::to_string(attr) + " not emulated");
  }
  return ok ? CUBLAS_STATUS_SUCCESS
            : fail(CUBLAS_STATUS_INVALID_VALUE, "preference " + std::to_string(attr) + " of the wrong size");
}

// One "algorithm", which records the alignments it was chosen under: cublasLtMatmul checks them, as
// a real kernel picked for 16-byte operands faults on less.
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                                                           cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                           cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                           cublasLtMatmulPreference_t pref, int requested,
                                                           cublasLtMatmulHeuristicResult_t results[], int* returned) {
  const std::string why =
      validate(*reinterpret_cast<Desc*>(desc), *reinterpret_cast<Layout*>(a), *reinterpret_cast<Layout*>(b),
               *reinterpret_cast<Layout*>(c), *reinterpret_cast<Layout*>(d));
  if (!why.empty()) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "heuristic: " + why);
  if (requested < 1) return fail(CUBLAS_STATUS_INVALID_VALUE, "heuristic: requestedAlgoCount < 1");
  const Preference& p = *reinterpret_cast<Preference*>(pref);
  results[0] = cublasLtMatmulHeuristicResult_t{};
  std::memcpy(results[0].algo.data, p.align, sizeof(p.align));
  // The bias pointer set now is what the heuristic assumes of its alignment (cublasLt.h, BIAS_POINTER).
  results[0].algo.data[2] = pointer_alignment(reinterpret_cast<Desc*>(desc)->bias);
  results[0].algo.data[7] = 0x464c4f57;  // "FLOW": an algorithm of this emulation
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha,
                                           const void* A, cublasLtMatrixLayout_t adesc, const void* B,
                                           cublasLtMatrixLayout_t bdesc, const void* beta, const void* C,
                                           cublasLtMatrixLayout_t cdesc, void* D, cublasLtMatrixLayout_t ddesc,
                                           const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t stream) {
  auto call = std::make_unique<Call>();
  call->d = *reinterpret_cast<Desc*>(desc);
  call->a = *reinterpret_cast<Layout*>(adesc);
  call->b = *reinterpret_cast<Layout*>(bdesc);
  call->c = *reinterpret_cast<Layout*>(cdesc);
  call->dl = *reinterpret_cast<Layout*>(ddesc);
  const std::string why = validate(call->d, call->a, call->b, call->c, call->dl);
  if (!why.empty()) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "matmul: " + why);
  if (!algo || algo->data[7] != 0x464c4f57) return fail(CUBLAS_STATUS_INVALID_VALUE, "matmul: no heuristic algorithm");
  uint32_t align[4];
  std::memcpy(align, algo->data, sizeof(align));
  const void* ptrs[4] = {A, B, C, D};
  const Layout* lays[4] = {&call->a, &call->b, &call->c, &call->dl};
  const char* names = "ABCD";
  for (int i = 0; i < 4; ++i) {
    const int64_t bytes = extent(*lays[i]) * value_bytes(value_type(lays[i]->type));
    if (bytes == 0) continue;
    if (i == 2 && *static_cast<const float*>(beta) == 0) continue;  // C is not read
    if (!emulated_driver().is_device_range(ptrs[i], static_cast<size_t>(bytes)))
      return fail(CUBLAS_STATUS_EXECUTION_FAILED, std::string("matmul: operand ") + names[i] +
                                                      " is not inside live device memory (" + std::to_string(bytes) +
                                                      " bytes)");
    // Every batch's matrix starts as aligned as the first one must be.
    const int64_t stride_bytes = lays[i]->batch_stride * value_bytes(value_type(lays[i]->type));
    const bool batches_aligned = lays[i]->batch <= 1 || align[i] == 0 || stride_bytes % align[i] == 0;
    if (align[i] != 0 && (reinterpret_cast<uintptr_t>(ptrs[i]) % align[i] != 0 || !batches_aligned))
      return fail(CUBLAS_STATUS_EXECUTION_FAILED, std::string("matmul: operand ") + names[i] +
                                                      " is less aligned than the preference promised (" +
                                                      std::to_string(align[i]) + " bytes)");
  }
  if ((call->d.epilogue & CUBLASLT_EPILOGUE_BIAS) && pointer_alignment(call->d.bias) < algo->data[2])
    return fail(CUBLAS_STATUS_EXECUTION_FAILED,
                "matmul: the bias is less aligned than the one the algorithm was chosen for");
  if (call->d.epilogue & CUBLASLT_EPILOGUE_BIAS) {
    const int64_t bytes = static_cast<int64_t>(call->dl.rows) * value_bytes(value_type(call->dl.type));
    if (!emulated_driver().is_device_range(call->d.bias, static_cast<size_t>(bytes)))
      return fail(CUBLAS_STATUS_EXECUTION_FAILED, "matmul: the bias is not inside live device memory");
  }
  call->pa = A;
  call->pb = B;
  call->pc = C;
  call->pd = D;
  call->alpha = *static_cast<const float*>(alpha);
  call->beta = *static_cast<const float*>(beta);
  const CUresult r = emulated_driver().enqueue(reinterpret_cast<CUstream>(stream), &run, call.release(),
                                               [](void* p) { std::unique_ptr<Call> owned(static_cast<Call*>(p)); });
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : fail(CUBLAS_STATUS_EXECUTION_FAILED, "matmul: enqueue failed");
}

}  // extern "C"

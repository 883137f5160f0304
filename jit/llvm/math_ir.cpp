// Note: see math_ir.h. The constants are Cephes' expf/logf/tanhf and Eigen's erf (also used by XLA
// and TVM); the scalar reference of each routine was checked exhaustively before being written as IR.
#include "jit/llvm/math_ir.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <initializer_list>
#include <limits>

namespace flow::jit::llvm_backend::ir {
namespace {

using llvm::IRBuilderBase;
using llvm::Type;
using llvm::Value;

// The integer type with the shape of `like` (i32 or <N x i32>).
Type* int_like(Type* like) {
  Type* i32 = Type::getInt32Ty(like->getContext());
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(i32, vt->getElementCount());
  return i32;
}

Value* fc(Value* like, double v) {
  return llvm::ConstantFP::get(like->getType(), v);
}
Value* ic(Type* ity, int64_t v) {
  return llvm::ConstantInt::get(ity, static_cast<uint64_t>(v), true);
}

Value* fmuladd(IRBuilderBase& b, Value* x, Value* y, Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

// Horner's rule: ((c0 * x + c1) * x + c2) ...
Value* horner(IRBuilderBase& b, Value* x, std::initializer_list<double> coeffs) {
  auto it = coeffs.begin();
  Value* p = fc(x, *it++);
  for (; it != coeffs.end(); ++it) p = fmuladd(b, p, x, fc(x, *it));
  return p;
}

Value* select_const(IRBuilderBase& b, Value* cond, double v, Value* otherwise) {
  return b.CreateSelect(cond, fc(otherwise, v), otherwise);
}

}  // namespace

Value* exp_f32(IRBuilderBase& b, Value* x) {
  Type* ity = int_like(x->getType());
  Value* is_nan = b.CreateFCmpUNO(x, x);
  // Clamp so that 2^n stays representable as two normal factors; NaN is patched at the end.
  Value* xc = b.CreateSelect(b.CreateFCmpOGT(x, fc(x, 88.8)), fc(x, 88.8), x);
  xc = b.CreateSelect(b.CreateFCmpOLT(xc, fc(x, -104.0)), fc(x, -104.0), xc);
  xc = select_const(b, is_nan, 0.0, xc);
  // n = round-to-nearest-even(x / ln 2) with the 1.5 * 2^23 trick (no SSE4.1 round needed).
  Value* t = b.CreateFMul(xc, fc(x, 1.44269504088896341));
  Value* n = b.CreateFSub(b.CreateFAdd(t, fc(x, 12582912.0)), fc(x, 12582912.0));
  // r = x - n ln2 in two parts (Cody-Waite): n * 0.693359375 is exact.
  Value* r = fmuladd(b, n, fc(x, -0.693359375), xc);
  r = fmuladd(b, n, fc(x, 2.12194440e-4), r);
  Value* p = horner(
      b, r, {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1});
  Value* y = b.CreateFAdd(fmuladd(b, p, b.CreateFMul(r, r), r), fc(x, 1.0));
  // y * 2^n as y * 2^n1 * 2^n2 with n1 = n >> 1: both factors normal, so denormal results round once
  // and overflow gives inf.
  Value* ni = b.CreateFPToSI(n, ity);
  Value* n1 = b.CreateAShr(ni, ic(ity, 1));
  Value* n2 = b.CreateSub(ni, n1);
  auto pow2 = [&](Value* e) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, ic(ity, 127)), ic(ity, 23)), x->getType());
  };
  Value* res = b.CreateFMul(b.CreateFMul(y, pow2(n1)), pow2(n2));
  return b.CreateSelect(is_nan, x, res);
}

Value* log_f32(IRBuilderBase& b, Value* x) {
  Type* ity = int_like(x->getType());
  // Denormal inputs: scale by 2^23 first.
  Value* small = b.CreateFCmpOLT(x, fc(x, 1.17549435e-38));
  Value* xs = b.CreateSelect(small, b.CreateFMul(x, fc(x, 8388608.0)), x);
  Value* eadj = b.CreateSelect(small, ic(ity, -23), ic(ity, 0));
  Value* bits = b.CreateBitCast(xs, ity);
  Value* e = b.CreateAnd(b.CreateLShr(bits, ic(ity, 23)), ic(ity, 0xff));
  e = b.CreateAdd(b.CreateSub(e, ic(ity, 126)), eadj);
  // m in [0.5, 1); fold to [sqrt(1/2), sqrt(2)) - 1.
  Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, ic(ity, 0x007fffff)), ic(ity, 0x3f000000)), x->getType());
  Value* lt = b.CreateFCmpOLT(m, fc(x, 0.707106781186547524));
  e = b.CreateSub(e, b.CreateZExt(lt, ity));
  Value* xm = b.CreateFSub(b.CreateSelect(lt, b.CreateFAdd(m, m), m), fc(x, 1.0));
  Value* z = b.CreateFMul(xm, xm);
  Value* p = horner(b, xm,
                    {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
                     -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  Value* y = b.CreateFMul(b.CreateFMul(p, xm), z);
  Value* fe = b.CreateSIToFP(e, x->getType());
  y = fmuladd(b, fe, fc(x, -2.12194440e-4), y);
  y = fmuladd(b, z, fc(x, -0.5), y);
  Value* r = b.CreateFAdd(xm, y);
  r = fmuladd(b, fe, fc(x, 0.693359375), r);
  // Special values: +inf -> +inf, +-0 -> -inf, x < 0 -> NaN, NaN -> itself.
  const double inf = std::numeric_limits<double>::infinity();
  r = select_const(b, b.CreateFCmpOEQ(x, fc(x, inf)), inf, r);
  r = select_const(b, b.CreateFCmpOEQ(x, fc(x, 0.0)), -inf, r);
  r = select_const(b, b.CreateFCmpOLT(x, fc(x, 0.0)), std::numeric_limits<double>::quiet_NaN(), r);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

Value* tanh_f32(IRBuilderBase& b, Value* x) {
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  // |x| < 0.625: odd polynomial.
  Value* z = b.CreateFMul(x, x);
  Value* p =
      horner(b, z, {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1, -3.33332819422E-1});
  Value* small = fmuladd(b, b.CreateFMul(p, z), x, x);
  // Otherwise 1 - 2 / (exp(2|x|) + 1), which saturates to 1 once exp overflows; NaN flows through.
  Value* e = exp_f32(b, b.CreateFMul(ax, fc(x, 2.0)));
  Value* large = b.CreateFSub(fc(x, 1.0), b.CreateFDiv(fc(x, 2.0), b.CreateFAdd(e, fc(x, 1.0))));
  large = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  return b.CreateSelect(b.CreateFCmpOLT(ax, fc(x, 0.625)), small, large);
}

Value* erf_f32(IRBuilderBase& b, Value* x) {
  // Clamp to [-4, 4] (erf is +-1 in float32 beyond); NaN compares false and flows through.
  Value* xc = b.CreateSelect(b.CreateFCmpOGT(x, fc(x, 4.0)), fc(x, 4.0), x);
  xc = b.CreateSelect(b.CreateFCmpOLT(xc, fc(x, -4.0)), fc(x, -4.0), xc);
  Value* x2 = b.CreateFMul(xc, xc);
  Value* p = horner(b, x2,
                    {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                     -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02});
  Value* q = horner(b, x2,
                    {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
                     -1.42647390514189e-02});
  return b.CreateFDiv(b.CreateFMul(xc, p), q);
}

}  // namespace flow::jit::llvm_backend::ir

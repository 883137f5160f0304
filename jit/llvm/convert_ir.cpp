// Note: see convert_ir.h. The float -> half rounding is the classic "add a magic number" scheme
// (F. Giesen's float_to_half_fast3_rtne) generalized to any (float32|float64) -> (float16|bfloat16)
// pair: normal results round with an integer add of (half ulp - 1 + odd bit), subnormal results by
// one float add that puts the destination's subnormal ulp at the source's last mantissa bit.
#include "jit/llvm/convert_ir.h"

#include <llvm/IR/IRBuilder.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace flow::jit::llvm_backend::ir {
namespace {

using dsl::DType;
using llvm::IRBuilderBase;
using llvm::Type;
using llvm::Value;

// `elem` with the shape (scalar or vector) of `like`.
Type* shaped(Type* elem, Type* like) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
}
Value* ic(Type* ty, uint64_t v) {
  return llvm::ConstantInt::get(ty, v);
}

struct FloatFormat {
  int bits, exp_bits, mant_bits, bias;
};
constexpr FloatFormat kF16{16, 5, 10, 15};
constexpr FloatFormat kBF16{16, 8, 7, 127};
constexpr FloatFormat kF32{32, 8, 23, 127};
constexpr FloatFormat kF64{64, 11, 52, 1023};

// Rounds float32/float64 `v` to the 16-bit format `d` (RNE); returns i16 bits.
Value* round_to_half(IRBuilderBase& b, Value* v, const FloatFormat& s, const FloatFormat& d) {
  llvm::LLVMContext& ctx = b.getContext();
  Type* ity = shaped(Type::getIntNTy(ctx, s.bits), v->getType());
  Type* i16 = shaped(Type::getInt16Ty(ctx), v->getType());
  const int shift = s.mant_bits - d.mant_bits;
  const uint64_t one = 1;
  const uint64_t sign_mask = one << (s.bits - 1);
  const uint64_t inf_s = ((one << s.exp_bits) - 1) << s.mant_bits;
  const uint64_t inf_d = ((one << d.exp_bits) - 1) << d.mant_bits;
  const uint64_t mant_d = (one << d.mant_bits) - 1;
  const uint64_t overflow = static_cast<uint64_t>(s.bias + d.bias + 1) << s.mant_bits;  // 2^(emax_d + 1)
  const uint64_t min_normal = static_cast<uint64_t>(s.bias + 1 - d.bias) << s.mant_bits;
  const int magic_exp = s.mant_bits + 1 - d.bias - d.mant_bits;  // destination subnormal ulp
  const uint64_t magic = static_cast<uint64_t>(s.bias + magic_exp) << s.mant_bits;

  Value* bits = b.CreateBitCast(v, ity);
  Value* sign = b.CreateAnd(bits, ic(ity, sign_mask));
  Value* abs = b.CreateXor(bits, sign);
  // NaN: keep the leading payload bits; a payload that would vanish becomes the quiet bit.
  Value* payload = b.CreateAnd(b.CreateLShr(abs, ic(ity, shift)), ic(ity, mant_d));
  payload = b.CreateSelect(b.CreateICmpEQ(payload, ic(ity, 0)), ic(ity, one << (d.mant_bits - 1)), payload);
  Value* nan = b.CreateOr(payload, ic(ity, inf_d));
  // Subnormal (or zero) result: one float add rounds at the right bit.
  Value* magic_f = b.CreateBitCast(ic(ity, magic), v->getType());
  Value* sub =
      b.CreateSub(b.CreateBitCast(b.CreateFAdd(b.CreateBitCast(abs, v->getType()), magic_f), ity), ic(ity, magic));
  // Normal result: rebias, add half an ulp - 1 plus the odd bit, truncate.
  Value* odd = b.CreateAnd(b.CreateLShr(abs, ic(ity, shift)), ic(ity, 1));
  const uint64_t rebias = static_cast<uint64_t>(static_cast<int64_t>(d.bias - s.bias)) << s.mant_bits;
  Value* norm = b.CreateAdd(abs, ic(ity, rebias + ((one << (shift - 1)) - 1)));
  norm = b.CreateLShr(b.CreateAdd(norm, odd), ic(ity, shift));
  Value* r = b.CreateSelect(b.CreateICmpULT(abs, ic(ity, min_normal)), sub, norm);
  r = b.CreateSelect(b.CreateICmpUGE(abs, ic(ity, overflow)), ic(ity, inf_d), r);
  r = b.CreateSelect(b.CreateICmpUGT(abs, ic(ity, inf_s)), nan, r);
  r = b.CreateOr(r, b.CreateLShr(sign, ic(ity, s.bits - 16)));
  return b.CreateTrunc(r, i16);
}

// i16 bits of float16 / bfloat16 -> float32 (exact).
Value* half_to_f32(IRBuilderBase& b, Value* h, DType t) {
  llvm::LLVMContext& ctx = b.getContext();
  Type* i32 = shaped(Type::getInt32Ty(ctx), h->getType());
  Type* f32 = shaped(Type::getFloatTy(ctx), h->getType());
  Value* w = b.CreateZExt(h, i32);
  if (t == DType::BFloat16) return b.CreateBitCast(b.CreateShl(w, ic(i32, 16)), f32);
  Value* sign = b.CreateShl(b.CreateAnd(w, ic(i32, 0x8000)), ic(i32, 16));
  Value* o = b.CreateShl(b.CreateAnd(w, ic(i32, 0x7fff)), ic(i32, 13));
  const uint64_t shifted_exp = 0x7c00u << 13;
  Value* exp = b.CreateAnd(o, ic(i32, shifted_exp));
  o = b.CreateAdd(o, ic(i32, (127u - 15u) << 23));
  // Inf/NaN: move the exponent all the way up.
  Value* infnan = b.CreateAdd(o, ic(i32, (128u - 16u) << 23));
  // Zero/subnormal: renormalize with one float subtraction.
  Value* den =
      b.CreateFSub(b.CreateBitCast(b.CreateAdd(o, ic(i32, 1u << 23)), f32), b.CreateBitCast(ic(i32, 113u << 23), f32));
  o = b.CreateSelect(b.CreateICmpEQ(exp, ic(i32, shifted_exp)), infnan, o);
  o = b.CreateSelect(b.CreateICmpEQ(exp, ic(i32, 0)), b.CreateBitCast(den, i32), o);
  return b.CreateBitCast(b.CreateOr(o, sign), f32);
}

// Float -> integer as x86 cvtt*: truncate; NaN / out of range -> the type's minimum.
Value* float_to_int(IRBuilderBase& b, Value* v, Type* ity, int bits) {
  Value* lo = llvm::ConstantFP::get(v->getType(), -std::ldexp(1.0, bits - 1));
  Value* hi = llvm::ConstantFP::get(v->getType(), std::ldexp(1.0, bits - 1));
  Value* in_range = b.CreateAnd(b.CreateFCmpOGE(v, lo), b.CreateFCmpOLT(v, hi));
  Value* int_min = llvm::ConstantInt::get(ity, llvm::APInt::getSignedMinValue(bits));
  return b.CreateSelect(in_range, b.CreateFPToSI(v, ity), int_min);
}

}  // namespace

Type* register_type(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::Bool:
      return Type::getInt1Ty(ctx);
    case DType::Int32:
      return Type::getInt32Ty(ctx);
    case DType::Int64:
      return Type::getInt64Ty(ctx);
    case DType::Float16:
    case DType::BFloat16:
      return Type::getInt16Ty(ctx);
    case DType::Float32:
      return Type::getFloatTy(ctx);
    case DType::Float64:
      return Type::getDoubleTy(ctx);
    case DType::UInt8:
    case DType::Int8:
      return Type::getInt8Ty(ctx);
    case DType::Int16:
      return Type::getInt16Ty(ctx);
  }
  throw std::invalid_argument("llvm backend: invalid dtype " + std::to_string(static_cast<int>(t)));
}

Type* storage_type(llvm::LLVMContext& ctx, DType t) {
  return t == DType::Bool ? Type::getInt8Ty(ctx) : register_type(ctx, t);
}

Value* to_storage(IRBuilderBase& b, Value* v, DType t) {
  return t == DType::Bool ? b.CreateZExt(v, shaped(b.getInt8Ty(), v->getType())) : v;
}

Value* from_storage(IRBuilderBase& b, Value* v, DType t) {
  return t == DType::Bool ? b.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType())) : v;
}

Value* cast_value(IRBuilderBase& b, Value* v, DType from, DType to) {
  if (from == to) return v;
  llvm::LLVMContext& ctx = b.getContext();
  Type* dst = shaped(register_type(ctx, to), v->getType());
  Type* f32 = shaped(Type::getFloatTy(ctx), v->getType());
  Type* f64 = shaped(Type::getDoubleTy(ctx), v->getType());
  // Small int sources widen to int32 first (zero-extended for uint8), exactly.
  if (dsl::is_small_int(from)) {
    Type* i32 = shaped(Type::getInt32Ty(ctx), v->getType());
    Value* wide = from == DType::UInt8 ? b.CreateZExt(v, i32) : b.CreateSExt(v, i32);
    return cast_value(b, wide, DType::Int32, to);
  }
  // Half sources: to bool by bits, else through float32 (exact).
  if (dsl::is_half(from)) {
    if (to == DType::Bool) {
      const uint64_t mag = 0x7fff;
      return b.CreateICmpNE(b.CreateAnd(v, ic(v->getType(), mag)), ic(v->getType(), 0));
    }
    return cast_value(b, half_to_f32(b, v, from), DType::Float32, to);
  }
  // Half destinations: round once from float32/float64; integers go through float64.
  if (dsl::is_half(to)) {
    const FloatFormat& d = to == DType::Float16 ? kF16 : kBF16;
    switch (from) {
      case DType::Float32:
        return round_to_half(b, v, kF32, d);
      case DType::Float64:
        return round_to_half(b, v, kF64, d);
      case DType::Bool:
        return round_to_half(b, b.CreateUIToFP(v, f32), kF32, d);
      default:
        return round_to_half(b, b.CreateSIToFP(v, f64), kF64, d);
    }
  }
  const bool from_f = dsl::is_floating(from), to_f = dsl::is_floating(to);
  if (to == DType::Bool) {
    return from_f ? b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                  : b.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }
  if (from == DType::Bool) return to_f ? b.CreateUIToFP(v, dst) : b.CreateZExt(v, dst);
  if (from_f && to_f) return to == DType::Float64 ? b.CreateFPExt(v, dst) : b.CreateFPTrunc(v, dst);
  if (from_f && dsl::is_small_int(to)) {  // through int32, then wrapped (torch's CPU casts)
    Value* i32 = float_to_int(b, v, shaped(Type::getInt32Ty(ctx), v->getType()), 32);
    return b.CreateTrunc(i32, dst);
  }
  if (from_f) return float_to_int(b, v, dst, to == DType::Int32 ? 32 : 64);
  if (to_f) return b.CreateSIToFP(v, dst);
  return b.CreateSExtOrTrunc(v, dst);
}

}  // namespace flow::jit::llvm_backend::ir

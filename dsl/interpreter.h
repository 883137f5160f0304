// Note: the reference interpreter for loop-level IR, the oracle for every backend test. Clarity
// and exactly defined semantics come before speed; it runs a GPU-scheduled nest on the CPU in SIMT
// lockstep so GPU schedules are checked on machines without a GPU.
//
// Semantics (the definition every backend is held to):
//  - Floating ops are computed in double and rounded to the node's dtype after each op (a float32
//    add is then bit-exact IEEE float32). InterpOptions::float64_math skips every rounding except
//    the final Store into caller memory (scratch memory then holds doubles too): the oracle mode.
//  - Cast follows C++: float->int truncates toward zero; NaN or out-of-range gives the minimum of
//    the target type (what x86 cvttss2si/cvttsd2si return, INT32_MIN / INT64_MIN). int->int wraps;
//    x->bool is x != 0 (NaN is true). Casts between floating types round once (RNE).
//  - Int32/Int64 + - * and Neg/Abs wrap (two's complement). Integer Div/Mod truncate toward zero;
//    division by zero throws std::runtime_error; INT_MIN / -1 wraps to INT_MIN, INT_MIN % -1 is 0.
//    Float Div by zero follows IEEE; float Mod is fmod.
//  - Min/Max on floats propagate NaN; between -0 and +0, Max gives +0 and Min gives -0.
//  - Comparisons with a NaN operand are false, except NE which is true.
//  - And/Or short-circuit and Select evaluates only the chosen operand (as in C): a guarded load
//    `select(j < n, x[j], 0)` never reads x[j] out of range.
//  - Intrinsics use <cmath> in double (rsqrt = 1/sqrt), then round to the dtype.
//  - Load/Store of float16/bfloat16 convert through the bit functions below; bool is a 0/1 byte.
//
// Statements: every For kind other than GPUThread runs serially in order (GPUBlock: one block after
// another). A GPUThread loop, or a chain of directly nested ones (y around x, ...), makes a block
// of T threads that execute its body in lockstep, statement by statement, under an active mask:
// If splits the mask; a For whose trip count differs between threads runs the largest count with
// per-thread masks. Barrier and BlockReduce need every thread of the block active, else they throw
// "collective under divergent control flow". BlockReduce folds element 0 of each thread's Local
// buffer in thread-id order (x fastest), then writes the result to every thread's element 0.
// Allocate'd memory is bounds-checked and starts poisoned (NaN for floating types, 0xCD bytes for
// integers); Local is per thread, Shared per block. Caller memory is not bounds-checked.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsl/expr.h"
#include "dsl/stmt.h"
#include "dsl/types.h"

namespace flow::dsl {

struct InterpOptions {
  // true: every floating op computed in double (oracle mode); false: in the declared dtype (float32
  // ops rounded to float after each op).
  bool float64_math = false;
};

// A scalar value during evaluation.
struct Scalar {
  DType type;
  int64_t i = 0;  // Bool, Int32, Int64
  double f = 0;   // floating types
};

// Evaluate an expression: variables by name, loads through a callback (which may be empty when the
// expression has no Load). Throws std::runtime_error on an evaluation error (division by zero, a
// variable whose value has another type than the Var node, ...).
Scalar eval_expr(const Expr& e, const std::function<Scalar(const std::string& var)>& lookup,
                 const std::function<Scalar(const std::string& buffer, int64_t index, DType t)>& load,
                 const InterpOptions& opt = {});

// Run a kernel over caller memory: args in LoweredFunc::params order (buffer pointers to raw storage
// in the param's dtype, float16/bfloat16 as uint16 bits, bool as uint8; or scalar values: i64 for
// Bool/Int32/Int64 params, f64 for floating ones, rounded to the param's dtype in either mode). For
// a CUDA kernel, defined LoweredFunc::grid/block dims are checked against the GPU loops' extents.
void interpret(const LoweredFunc& f, const std::vector<ArgValue>& args, const InterpOptions& opt = {});

// Element `index` of caller memory holding `t` (float16/bfloat16 as bits, bool as a byte), as the
// interpreter reads it: an integer scalar for Bool/Int32/Int64, a floating one otherwise.
Scalar read_element(DType t, const void* base, int64_t index);

// Scalar conversions shared with tests: IEEE binary16 and bfloat16 <-> float, round-to-nearest-even,
// overflow to infinity, NaN preserved (sign and leading payload bits kept; a payload that would
// vanish becomes the quiet bit).
uint16_t float_to_half_bits(float x);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(uint16_t h);

}  // namespace flow::dsl

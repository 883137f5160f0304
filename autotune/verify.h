// Note: a tuning candidate must compute what the default schedule computes. The tuner times
// candidates and keeps the fastest; a schedule that is wrong for some block size or vector width on
// some shape would otherwise become the tuned kernel, silently. So before a workload is searched its
// default kernel runs once and its outputs are kept; before each candidate's timed launches its
// outputs are filled with all-ones bytes (NaN), so elements it leaves unwritten show; after them its
// outputs are compared with the default's, and a candidate that differs is a failed trial ("wrong
// result: ..."), never a winner. (A float reduction that feeds an integer or bool output can flip
// at a boundary under a reordered sum: such a candidate is dropped, a lost option, not a wrong
// result.) The comparison is norm-wise, as reordering a reduction legitimately moves
// every element by a little of the output's scale: an element may differ from the default's by
// rtol * (|default| + max |default| of the output) (float32 1e-3, float16 1e-2, bfloat16 4e-2,
// float64 1e-9); integers and bools must be equal; a NaN must stay NaN and an infinity the same
// infinity. What this catches: unwritten or garbage elements, shifted or swapped indexing, a lost
// part of a reduction. TVM's autotuner offers the same check as an option (check_correctness);
// here it is always on, since the extra launch and copy cost little beside the timing.
#pragma once
#include <cstddef>
#include <string>

#include "dsl/types.h"

namespace flow::autotune {

// "" when `got` matches `want` (both `bytes` long, elements of `t`) as above; otherwise a sentence
// naming the first differing element and both values.
std::string compare_outputs(const void* want, const void* got, size_t bytes, dsl::DType t);

}  // namespace flow::autotune

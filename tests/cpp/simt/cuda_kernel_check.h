// Holds a CUDA kernel's printed C++ (jit/cuda/cuda_printer.h) to the loop interpreter, by running
// the printed text on the SIMT emulator (simt_emulator.h). Every test that schedules kernels for
// the GPU and interprets them calls this beside the interpreter, so the CUDA text itself, not only
// the loop nest it was printed from, is checked on every kernel the suite generates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dsl/stmt.h"
#include "jit/layouts.h"
#include "jit/tensor.h"
#include "scheduler/scheduler.h"

namespace flow::test {

// The allocation a buffer argument points into: the emulator and the interpreter each get their
// own copy of it (so views into one storage keep sharing it), with guard bytes around it.
struct BufferSpan {
  const void* base = nullptr;
  size_t bytes = 0;
};

inline BufferSpan span_of(const jit::Tensor& t) {
  if (!t.storage) return {};
  return {t.storage->data(), t.storage->size()};
}

// Value `v` as Executable::run binds it: its own tensor in `slots`, or for a view, its root's
// storage with the view's layout (jit::compute_layouts).
jit::Tensor bind_view(const std::vector<jit::Tensor>& slots, const jit::ValueLayouts& lay, int v);

// A scheduled kernel's launch arguments as dsl::interpret (and the emulator) take them, buffers
// from `tensor_of(value)`, with the allocation each buffer points into.
struct KernelCall {
  std::vector<dsl::ArgValue> args;
  std::vector<BufferSpan> spans;
};
KernelCall kernel_call(const std::vector<sched::KernelArg>& args,
                       const std::function<jit::Tensor(int value)>& tensor_of);

// How far a floating result may be from `ref` (the loop interpreter's, or another schedule's) when
// the finite elements of its output have median magnitude `typical` (median_magnitude): libm and
// the order of a reduction's partial sums differ between the two, and a sum with cancellation
// (a small result of large terms) is off by a part of its terms' size, which the median stands in
// for; integers and bools must agree exactly.
double result_tolerance(dsl::DType t, double ref, double typical);
double median_magnitude(std::vector<double> values);

// Random contents for a buffer of `numel` elements of `t` (plus one spare byte, so an empty buffer
// still has an address): normal values, with (when `specials`) NaN, infinities, -0 and huge values
// mixed in for floats and extreme values for integers. A reduction over a row with one NaN is NaN
// whatever the kernel does, so reductions are best checked on finite rows too.
std::vector<unsigned char> random_bytes(dsl::DType t, int64_t numel, std::mt19937_64& rng, bool specials = true);

// Runs `f` (a Target::CUDA LoweredFunc) twice on copies of its buffers, once through the loop
// interpreter and once as printed CUDA C++ on the SIMT emulator, and adds a GoogleTest failure for
// every difference: an output element that differs beyond the dtype's tolerance, one that only
// one of the two wrote (outputs start poisoned), a changed input, a write outside an allocation
// (guard bytes), or a fault (misaligned vector access, a barrier or shuffle not reached by every
// thread). `args` are as for dsl::interpret; `spans[i]` is the allocation of buffer param i (unused
// for scalars). The caller's own buffers are not touched.
void expect_cuda_text_matches_interpreter(const dsl::LoweredFunc& f, const std::vector<dsl::ArgValue>& args,
                                          const std::vector<BufferSpan>& spans, const std::string& context = "");

}  // namespace flow::test

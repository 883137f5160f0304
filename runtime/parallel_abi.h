// Note: the C ABI that generated CPU code calls for a parallel loop. The LLVM backend declares
//   declare void @flow_parallel_for(i64 %n, ptr %body, ptr %ctx)
// in each module and resolves the symbol by address (it registers
// `reinterpret_cast<void*>(&flow_parallel_for)` as an absolute symbol in the ORC JITDylib) rather
// than by a dynamic-symbol lookup, so it works in a static library with no -rdynamic and taking the
// address is also what keeps this object linked in.
//
// The body is called with contiguous ranges covering [0, n) exactly once, on the process's
// parallel backend (runtime/parallel.h), and the call returns when all have finished. A call from
// inside a parallel region runs serially. The body must not throw (generated code does not): an exception
// reaching this boundary is reported on stderr and aborts the process, since it cannot unwind
// through JIT-compiled frames.
#pragma once
#include <cstdint>

extern "C" {
void flow_parallel_for(int64_t n, void (*body)(void* ctx, int64_t begin, int64_t end), void* ctx) noexcept;
}

#include "runtime/parallel_abi.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "runtime/parallel.h"

extern "C" void flow_parallel_for(int64_t n, void (*body)(void* ctx, int64_t begin, int64_t end), void* ctx) noexcept {
  try {
    flow::runtime::parallel_for(n, body, ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[flow] fatal: exception escaped a parallel kernel body: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "[flow] fatal: unknown exception escaped a parallel kernel body\n");
    std::abort();
  }
}

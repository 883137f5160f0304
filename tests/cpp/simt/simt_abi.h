// The emulator's interface to a kernel built for the host: included both by the emulator
// (simt_emulator.cpp) and by the prelude every kernel is built with (simt_host.h), so the two agree
// by construction. No includes: the prelude may not pull in system headers.
#pragma once

struct flow_simt_dim3 {
  unsigned x, y, z;
};

// What a kernel thread calls back into.
struct flow_simt_api {
  void (*syncthreads)();
  // kind: 0 idx, 1 up, 2 down, 3 xor. Returns the source lane's bits (all ones when the source
  // lane is not in `mask`, as a value the hardware leaves undefined).
  unsigned long long (*shfl)(int kind, unsigned mask, unsigned long long bits, int arg, int width);
  // A failed device-side check: the emulator stops the launch and reports `what`.
  void (*fault)(const char* what, unsigned long long detail);
};

// One per built kernel (the symbol flow_simt_state): the callbacks, and the builtins of the thread
// that runs now, which the emulator rewrites before it resumes a thread.
struct flow_simt_state_t {
  const flow_simt_api* api;
  flow_simt_dim3 threadIdx, blockIdx, blockDim, gridDim;
  // The kernel's __shared__ variables, all in one section (simt_host.h), which the emulator fills
  // with all-ones bytes (a NaN in every float type) before each block: a device gives a block
  // shared memory whose contents are undefined, so a read before the block's own write must fail a
  // test rather than see zeros or the previous block's values.
  char* shared_begin;
  char* shared_end;
};

// Note: a SIMT emulator for flow's CUDA C++, so the tests run the generated kernels' exact text on
// a machine without a GPU. NVRTC alone proves the text compiles; it cannot show that the printed
// indexing, the 16-byte vector accesses, the warp-shuffle reductions or the half conversions
// compute the right values. Here the same source is built for the host by the C++ compiler, with
// tests/cpp/simt/simt_host.h standing in for the device's builtins, and launched over a grid:
//  - blocks run one after another; the threads of a block run as fibers (ucontext), each on its own
//    stack, switched at every __syncthreads and __shfl_*_sync, so collectives work as on a device;
//  - between two synchronization points the threads of a block run in a shuffled order (seeded),
//    so shared-memory code that relies on an unsynchronized order shows up as wrong values;
//  - what the hardware would fault on or leave undefined is an error here: a misaligned vector
//    access, a __syncthreads that not every thread of the block reaches, a shuffle whose lanes
//    disagree on the mask or that a lane of the mask never reaches (the emulator reports the
//    deadlock instead of hanging); a shuffle from a lane outside the mask returns all-ones bits
//    (a NaN for floats), so using such a value fails the comparison; and shared memory holds
//    all-ones bytes at each block's start (the device leaves it undefined), so a read before the
//    block's own write shows up too;
//  - kernels without collectives run each thread to completion directly, without fibers.
// What it does not model: memory ordering between blocks, contention on atomics (atomicCAS is a
// plain compare and store: a thread is never interrupted between synchronization points), timing,
// and the device's math library (the host's libm stands in: results may differ from libdevice in
// the last bit).
//
// Built objects are cached on disk by a hash of everything that goes into them, under
// ~/.cache/flow-simt (FLOW_SIMT_CACHE overrides the folder), so a later test run, in this clone or a
// fresh one, does not compile again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace flow::test::simt {

struct Dim3 {
  int64_t x = 1, y = 1, z = 1;
};

// A CUDA C++ translation unit built for the host, with the `extern "C"` entries asked for.
class Module {
 public:
  // `headers` are (name, text) pairs the source #includes by name, as NVRTC's in-memory headers.
  // Throws std::runtime_error carrying the compiler's log when the source does not build.
  Module(const std::string& source, const std::vector<std::string>& entries,
         const std::vector<std::pair<std::string, std::string>>& headers = {});
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Runs `entry` over grid x block as cuLaunchKernel would: params[i] points at the value of the
  // kernel's i-th parameter. Throws std::runtime_error naming the block and thread on a fault.
  // `seed` picks the order threads run in between synchronization points.
  void launch(const std::string& entry, Dim3 grid, Dim3 block, void* const* params, uint64_t seed = 1) const;

  // The size in bytes of each parameter of `entry`, in order (what cuLaunchKernel's params point at).
  const std::vector<size_t>& param_sizes(const std::string& entry) const;

  // The source file the object was built from (for failure messages).
  const std::string& source_path() const { return source_path_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string source_path_;
};

// The shared Module for (source, entries, headers), built once per process.
std::shared_ptr<const Module> module_for(const std::string& source, const std::vector<std::string>& entries,
                                         const std::vector<std::pair<std::string, std::string>>& headers = {});

}  // namespace flow::test::simt

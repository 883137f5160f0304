#include "simt/simt_emulator.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include "simt/simt_abi.h"

#if defined(__x86_64__) && defined(__ELF__) && !defined(__ILP32__)
#define FLOW_SIMT_OWN_SWITCH 1  // see FiberContext
#else
#define FLOW_SIMT_OWN_SWITCH 0
#include <ucontext.h>  // fibers elsewhere (see FiberContext)
#endif

#ifndef FLOW_SIMT_CXX
#error "FLOW_SIMT_CXX (the host C++ compiler) must be defined by the build"
#endif
#ifndef FLOW_SIMT_PRELUDE
#error "FLOW_SIMT_PRELUDE (the path of simt_host.h) must be defined by the build"
#endif
#ifndef FLOW_SIMT_CACHE_DEFAULT
#define FLOW_SIMT_CACHE_DEFAULT "/tmp/flow_simt_cache"
#endif

namespace flow::test::simt {

namespace {

using Dim3u = flow_simt_dim3;
using Api = flow_simt_api;
using State = flow_simt_state_t;

using Entry = void (*)(void* const*);

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("simt: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Written beside and renamed into place: test binaries run in parallel (ctest -j) and may build the
// same kernel at once; a compiler must never read a half-written file.
void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("simt: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("simt: cannot rename " + tmp);
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// $FLOW_SIMT_CACHE, else a folder under the user's cache (outside the clone, so a fresh CI clone
// reuses what earlier runs built: entries are keyed by everything that goes into them), else the
// build's folder.
std::string cache_dir() {
  if (const char* env = std::getenv("FLOW_SIMT_CACHE"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/flow-simt";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/flow-simt";
  return FLOW_SIMT_CACHE_DEFAULT;
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
  }
}

// Calls a kernel with cuLaunchKernel's argument convention (each params[i] points at a value).
const char* kCallShim = R"(
extern "C" char __start_flow_simt_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_flow_simt_shared[] __attribute__((weak, visibility("hidden")));
flow_simt_state_t flow_simt_state = {nullptr, {}, {}, {}, {}, __start_flow_simt_shared, __stop_flow_simt_shared};
template <int... I>
struct flow_simt_seq {};
template <class... A, int... I>
inline void flow_simt_call(void (*fn)(A...), void* const* p, flow_simt_seq<I...>) {
  fn(*static_cast<A*>(p[I])...);
}
template <class... A>
inline void flow_simt_call(void (*fn)(A...), void* const* p) {
  flow_simt_call(fn, p, flow_simt_seq<__integer_pack(static_cast<int>(sizeof...(A)))...>{});
}
template <class... A>
inline int flow_simt_sizes(void (*)(A...), unsigned long* out, int cap) {
  const unsigned long s[] = {sizeof(A)..., 0};
  for (int i = 0; i < static_cast<int>(sizeof...(A)) && i < cap; ++i) out[i] = s[i];
  return static_cast<int>(sizeof...(A));
}
)";

// ---- the run of one launch ------------------------------------------------------------------------

constexpr size_t kStackBytes = size_t{256} << 10;

// Note: a fiber switch on x86-64 saves what the ABI says a call preserves (rbx, rbp, r12-r15, the
// MXCSR and x87 control words) on the old stack and resumes the other. glibc's swapcontext also
// saves and restores the signal mask, a system call per switch: a quarter of the host time of a
// ResNet-50 on the emulated device. Other machines (and ABIs: x32, non-ELF) keep ucontext. The
// switch returns into another stack, which a CET shadow stack would refuse: the build compiles this
// file without CET markings (tests/cpp/CMakeLists.txt), so no binary linking it enables one.
#if FLOW_SIMT_OWN_SWITCH
struct FiberContext {
  void* sp = nullptr;
};

extern "C" void flow_simt_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .p2align 4
  .type flow_simt_switch, @function
flow_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size flow_simt_switch, .-flow_simt_switch
)");

void switch_context(FiberContext& from, const FiberContext& to) {
  flow_simt_switch(&from.sp, to.sp);
}

// A context that starts `entry` (which never returns) on `stack` at the first switch to it: the
// frame flow_simt_switch pops, with `entry` as its return address.
void make_context(FiberContext& c, char* stack, size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  top -= 16;
  // flow_simt_switch's `ret` pops `entry` from `top`, so `entry` starts with rsp = top + 8 (8 mod 16,
  // as after a call); its own return address, at top + 8, is null, where unwinders stop.
  *reinterpret_cast<void (**)()>(top) = entry;
  *reinterpret_cast<uintptr_t*>(top + 8) = 0;
  const uintptr_t sp = top - 7 * 8;  // six registers and the control words
  std::memset(reinterpret_cast<void*>(sp), 0, 7 * 8);
  // The thread's floating-point modes (MXCSR, x87 control word), as getcontext would capture them.
  uint32_t mxcsr = 0;
  uint16_t fpu_cw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_cw));
  std::memcpy(reinterpret_cast<void*>(sp), &mxcsr, sizeof mxcsr);
  std::memcpy(reinterpret_cast<void*>(sp + 4), &fpu_cw, sizeof fpu_cw);
  c.sp = reinterpret_cast<void*>(sp);
}
#else
struct FiberContext {
  ucontext_t ctx;
};

void switch_context(FiberContext& from, FiberContext& to) {
  swapcontext(&from.ctx, &to.ctx);
}

void make_context(FiberContext& c, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c.ctx);
  c.ctx.uc_stack.ss_sp = stack;
  c.ctx.uc_stack.ss_size = bytes;
  c.ctx.uc_link = nullptr;
  makecontext(&c.ctx, entry, 0);
}
#endif

enum class FiberState { Runnable, AtBarrier, AtShuffle, Done };

struct Fiber {
  FiberContext ctx;
  FiberState state = FiberState::Runnable;
  Dim3u tid{0, 0, 0};
  unsigned long long shfl_result = 0;
};

struct Warp {
  unsigned arrived = 0;  // lanes waiting in a shuffle
  unsigned mask[32] = {};
  int kind[32] = {}, arg[32] = {}, width[32] = {};
  unsigned long long in[32] = {};
};

struct Launch {
  State* state = nullptr;
  Entry entry = nullptr;
  void* const* params = nullptr;
  bool fibers = false;
  int nthreads = 0;
  std::vector<Fiber> fiber;
  std::vector<Warp> warps;
  int current = -1;
  int barrier_arrived = 0;
  FiberContext scheduler;
  std::string fault;  // set by a faulting thread (fiber mode)
  char* stacks = nullptr;
};

Launch* g_launch = nullptr;  // the launch in progress (launches are serialized by g_launch_mu)
std::mutex g_launch_mu;

std::string where(const Launch& l) {
  const Dim3u b = l.state->blockIdx;
  const Dim3u t = l.state->threadIdx;
  return "block (" + std::to_string(b.x) + "," + std::to_string(b.y) + "," + std::to_string(b.z) + "), thread (" +
         std::to_string(t.x) + "," + std::to_string(t.y) + "," + std::to_string(t.z) + ")";
}

void yield_to_scheduler() {
  Launch& l = *g_launch;
  switch_context(l.fiber[static_cast<size_t>(l.current)].ctx, l.scheduler);
}

void on_fault(const char* what, unsigned long long detail) {
  Launch& l = *g_launch;
  char hex[32];
  std::snprintf(hex, sizeof(hex), "0x%llx", detail);
  std::string msg = std::string(what) + " (" + hex + ") in " + where(l);
  if (!l.fibers) throw std::runtime_error(msg);
  l.fault = std::move(msg);
  yield_to_scheduler();  // never resumed
}

void on_syncthreads() {
  Launch& l = *g_launch;
  if (!l.fibers) {
    if (l.nthreads == 1) return;
    on_fault("__syncthreads in a kernel run without fibers", 0);
  }
  l.fiber[static_cast<size_t>(l.current)].state = FiberState::AtBarrier;
  if (++l.barrier_arrived == l.nthreads) {
    for (Fiber& f : l.fiber) f.state = FiberState::Runnable;
    l.barrier_arrived = 0;
  }
  yield_to_scheduler();
}

// The source lane of a shuffle, or -1 when it reads the caller's own value (out of the segment).
int shuffle_source(int kind, int lane, int arg, int width) {
  const int base = lane & ~(width - 1);
  switch (kind) {
    case 0:
      return base + (arg & (width - 1));
    case 1:
      return lane - arg >= base ? lane - arg : -1;
    case 2:
      return lane + arg < base + width ? lane + arg : -1;
    default: {
      const int src = lane ^ arg;
      return src < base + width ? src : -1;
    }
  }
}

unsigned long long on_shfl(int kind, unsigned mask, unsigned long long bits, int arg, int width) {
  Launch& l = *g_launch;
  const int tid = l.current < 0 ? 0 : l.current;
  const int lane = tid & 31;
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0) on_fault("shuffle width not a power of two <= 32", width);
  if (!((mask >> lane) & 1u)) on_fault("shuffle by a lane outside its own mask", mask);
  if (!l.fibers) {
    if (mask != 1u) on_fault("shuffle over several lanes in a kernel run without fibers", mask);
    return bits;
  }
  Warp& w = l.warps[static_cast<size_t>(tid >> 5)];
  w.arrived |= 1u << lane;
  w.mask[lane] = mask;
  w.kind[lane] = kind;
  w.arg[lane] = arg;
  w.width[lane] = width;
  w.in[lane] = bits;
  Fiber& self = l.fiber[static_cast<size_t>(tid)];
  self.state = FiberState::AtShuffle;
  if ((w.arrived & mask) == mask) {
    // Every lane of the mask is here: check they agree, then hand out the values.
    for (int q = 0; q < 32; ++q) {
      if (!((mask >> q) & 1u)) continue;
      if (w.mask[q] != mask) on_fault("shuffle lanes disagree on the mask", (uint64_t{w.mask[q]} << 32) | mask);
    }
    for (int q = 0; q < 32; ++q) {
      if (!((mask >> q) & 1u)) continue;
      const int src = shuffle_source(w.kind[q], q, w.arg[q], w.width[q]);
      unsigned long long v = w.in[q];
      if (src >= 0 && src != q) v = ((mask >> src) & 1u) ? w.in[src] : ~0ull;
      Fiber& f = l.fiber[static_cast<size_t>((tid & ~31) + q)];
      f.shfl_result = v;
      f.state = FiberState::Runnable;
    }
    w.arrived &= ~mask;
  }
  yield_to_scheduler();
  return self.shfl_result;
}

const Api g_api = {&on_syncthreads, &on_shfl, &on_fault};

// A fiber's first frame: runs the kernel, then switches to the scheduler for good.
[[noreturn]] void fiber_main() {
  Launch& l = *g_launch;
  l.entry(l.params);
  l.fiber[static_cast<size_t>(l.current)].state = FiberState::Done;
  yield_to_scheduler();
  std::abort();  // a finished fiber is never resumed
}

Dim3u thread_index(int t, const Dim3& block) {
  const auto bx = static_cast<int>(block.x), by = static_cast<int>(block.y);
  return {static_cast<unsigned>(t % bx), static_cast<unsigned>((t / bx) % by), static_cast<unsigned>(t / (bx * by))};
}

std::string deadlock_report(const Launch& l) {
  int at_barrier = 0, done = 0;
  std::string shuffles;
  for (size_t t = 0; t < l.fiber.size(); ++t) {
    if (l.fiber[t].state == FiberState::AtBarrier) ++at_barrier;
    if (l.fiber[t].state == FiberState::Done) ++done;
    if (l.fiber[t].state == FiberState::AtShuffle && shuffles.size() < 200) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), " thread %zu (mask 0x%x)", t, l.warps[t >> 5].mask[t & 31]);
      shuffles += buf;
    }
  }
  return "deadlock in block (" + std::to_string(l.state->blockIdx.x) + "," + std::to_string(l.state->blockIdx.y) + "," +
         std::to_string(l.state->blockIdx.z) + "): " + std::to_string(at_barrier) + " of " +
         std::to_string(l.nthreads) + " threads wait at __syncthreads, " + std::to_string(done) + " returned" +
         (shuffles.empty() ? std::string() : ", waiting in a shuffle:" + shuffles);
}

void run_block_with_fibers(Launch& l, const Dim3& block, std::mt19937_64& rng) {
  const auto n = static_cast<size_t>(l.nthreads);
  for (size_t t = 0; t < n; ++t) {
    Fiber& f = l.fiber[t];
    f.state = FiberState::Runnable;
    f.tid = thread_index(static_cast<int>(t), block);
    make_context(f.ctx, l.stacks + t * kStackBytes, kStackBytes, &fiber_main);
  }
  for (Warp& w : l.warps) w = Warp{};
  l.barrier_arrived = 0;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  size_t done = 0;
  while (done < n) {
    std::shuffle(order.begin(), order.end(), rng);
    bool ran = false;
    for (const int t : order) {
      Fiber& f = l.fiber[static_cast<size_t>(t)];
      if (f.state != FiberState::Runnable) continue;
      l.current = t;
      l.state->threadIdx = f.tid;
      switch_context(l.scheduler, f.ctx);
      if (!l.fault.empty()) throw std::runtime_error(l.fault);
      if (f.state == FiberState::Done) ++done;
      ran = true;
    }
    if (!ran && done < n) throw std::runtime_error(deadlock_report(l));
  }
}

}  // namespace

struct Module::Impl {
  void* handle = nullptr;
  State* state = nullptr;
  std::map<std::string, Entry> entries;
  std::map<std::string, std::vector<size_t>> param_sizes;
  bool collectives = false;
};

Module::Module(const std::string& source, const std::vector<std::string>& entries,
               const std::vector<std::pair<std::string, std::string>>& headers)
    : impl_(std::make_unique<Impl>()) {
  // The prelude and the ABI header it includes (from its own folder) go into the cache key.
  const std::string prelude_path = FLOW_SIMT_PRELUDE;
  const std::string prelude =
      read_file(prelude_path) + read_file(prelude_path.substr(0, prelude_path.rfind('/') + 1) + "simt_abi.h");
  std::string unit =
      source + "\n// ---- added by the SIMT emulator (tests/cpp/simt/simt_emulator.cpp) ----\n" + kCallShim;
  for (const std::string& e : entries)
    unit += "extern \"C\" void flow_simt_entry_" + e + "(void* const* p) { flow_simt_call(&" + e + ", p); }\n" +
            "extern \"C\" int flow_simt_sizes_" + e + "(unsigned long* o, int cap) { return flow_simt_sizes(&" + e +
            ", o, cap); }\n";
  const std::string flags = "-std=c++17 -O1 -fPIC -shared -w";
  uint64_t h = fnv1a(prelude);
  h = fnv1a(unit, h);
  h = fnv1a(flags + FLOW_SIMT_CXX, h);
  for (const auto& [name, text] : headers) h = fnv1a(text, fnv1a(name, h));
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  const std::string dir = cache_dir() + "/" + hex;
  source_path_ = dir + "/kernel.cpp";
  const std::string so = dir + "/kernel.so";
  if (::access(so.c_str(), R_OK) != 0) {
    make_dirs(dir);
    for (const auto& [name, text] : headers) write_file(dir + "/" + name, text);
    write_file(source_path_, unit);
    const std::string tmp = so + ".tmp" + std::to_string(::getpid());
    const std::string cmd = std::string(FLOW_SIMT_CXX) + " " + flags + " -include " + FLOW_SIMT_PRELUDE + " -I" + dir +
                            " -o " + tmp + " " + source_path_ + " -lm 2>&1";
    std::string log;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("simt: cannot run " + cmd);
    char buf[4096];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), p)) > 0) log.append(buf, got);
    const int rc = ::pclose(p);
    if (rc != 0) throw std::runtime_error("simt: the host build of " + source_path_ + " failed:\n" + cmd + "\n" + log);
    if (std::rename(tmp.c_str(), so.c_str()) != 0) throw std::runtime_error("simt: cannot rename " + tmp);
  }
  impl_->handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!impl_->handle) throw std::runtime_error(std::string("simt: dlopen: ") + ::dlerror());
  impl_->state = static_cast<State*>(::dlsym(impl_->handle, "flow_simt_state"));
  if (!impl_->state) throw std::runtime_error("simt: " + so + " has no flow_simt_state");
  impl_->state->api = &g_api;
  for (const std::string& e : entries) {
    void* sym = ::dlsym(impl_->handle, ("flow_simt_entry_" + e).c_str());
    if (!sym) throw std::runtime_error("simt: " + so + " has no entry " + e);
    impl_->entries[e] = reinterpret_cast<Entry>(sym);
    using Sizes = int (*)(unsigned long*, int);
    auto sizes = reinterpret_cast<Sizes>(::dlsym(impl_->handle, ("flow_simt_sizes_" + e).c_str()));
    if (!sizes) throw std::runtime_error("simt: " + so + " has no parameter sizes for " + e);
    unsigned long buf[256];
    const int n = sizes(buf, 256);
    if (n > 256) throw std::runtime_error("simt: " + e + " has more than 256 parameters");
    impl_->param_sizes[e].assign(buf, buf + n);
  }
  // Kernels without collectives run each thread straight through (no fibers needed).
  impl_->collectives = unit.find("__syncthreads") != std::string::npos || unit.find("__shfl") != std::string::npos ||
                       unit.find("block_reduce") != std::string::npos;
}

Module::~Module() {
  if (impl_ && impl_->handle) ::dlclose(impl_->handle);
}

const std::vector<size_t>& Module::param_sizes(const std::string& entry) const {
  const auto it = impl_->param_sizes.find(entry);
  if (it == impl_->param_sizes.end()) throw std::invalid_argument("simt: no entry " + entry);
  return it->second;
}

void Module::launch(const std::string& entry, Dim3 grid, Dim3 block, void* const* params, uint64_t seed) const {
  const auto it = impl_->entries.find(entry);
  if (it == impl_->entries.end()) throw std::invalid_argument("simt: no entry " + entry);
  for (const int64_t d : {grid.x, grid.y, grid.z, block.x, block.y, block.z})
    if (d < 0) throw std::invalid_argument("simt: negative launch dimension");
  const int64_t nthreads = block.x * block.y * block.z;
  if (nthreads > 1024) throw std::invalid_argument("simt: more than 1024 threads per block");
  if (nthreads == 0 || grid.x * grid.y * grid.z == 0) return;

  std::lock_guard<std::mutex> lock(g_launch_mu);
  Launch l;
  l.state = impl_->state;
  l.entry = it->second;
  l.params = params;
  l.nthreads = static_cast<int>(nthreads);
  l.fibers = impl_->collectives && nthreads > 1;
  l.state->blockDim = {static_cast<unsigned>(block.x), static_cast<unsigned>(block.y), static_cast<unsigned>(block.z)};
  l.state->gridDim = {static_cast<unsigned>(grid.x), static_cast<unsigned>(grid.y), static_cast<unsigned>(grid.z)};
  struct Stacks {
    void* p = MAP_FAILED;
    size_t bytes = 0;
    ~Stacks() {
      if (p != MAP_FAILED) ::munmap(p, bytes);
    }
  } stacks;
  if (l.fibers) {
    stacks.bytes = static_cast<size_t>(nthreads) * kStackBytes;
    stacks.p =
        ::mmap(nullptr, stacks.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stacks.p == MAP_FAILED) throw std::runtime_error("simt: cannot map fiber stacks");
    l.stacks = static_cast<char*>(stacks.p);
    l.fiber.resize(static_cast<size_t>(nthreads));
    l.warps.resize(static_cast<size_t>((nthreads + 31) / 32));
  }
  g_launch = &l;
  struct Reset {
    ~Reset() { g_launch = nullptr; }
  } reset;
  std::mt19937_64 rng(seed);
  for (int64_t z = 0; z < grid.z; ++z) {
    for (int64_t y = 0; y < grid.y; ++y) {
      for (int64_t x = 0; x < grid.x; ++x) {
        l.state->blockIdx = {static_cast<unsigned>(x), static_cast<unsigned>(y), static_cast<unsigned>(z)};
        if (l.state->shared_begin != l.state->shared_end)
          std::memset(l.state->shared_begin, 0xFF, static_cast<size_t>(l.state->shared_end - l.state->shared_begin));
        if (l.fibers) {
          run_block_with_fibers(l, block, rng);
          continue;
        }
        for (int t = 0; t < l.nthreads; ++t) {
          l.current = t;
          l.state->threadIdx = thread_index(t, block);
          l.entry(l.params);
        }
      }
    }
  }
}

std::shared_ptr<const Module> module_for(const std::string& source, const std::vector<std::string>& entries,
                                         const std::vector<std::pair<std::string, std::string>>& headers) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Module>> modules;
  std::string key = source;
  for (const auto& e : entries) key += "\n#entry " + e;
  for (const auto& [name, text] : headers) key += "\n#header " + name + "\n" + text;
  std::lock_guard<std::mutex> lock(mu);
  auto& m = modules[key];
  if (!m) m = std::make_shared<const Module>(source, entries, headers);
  return m;
}

}  // namespace flow::test::simt

#include "simt/cuda_kernel_check.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "dsl/interpreter.h"
#include "dsl/ir_visitor.h"
#include "jit/cuda/cuda_printer.h"
#include "jit/cuda/embedded_helpers.h"
#include "jit/cuda_launch.h"
#include "simt/simt_emulator.h"

namespace flow::test {

namespace {

using dsl::DType;

constexpr size_t kGuard = 256;  // guard bytes on each side of a copy
// What the guard bytes hold: different for the two runs, so a read past an allocation, by the
// printed text or by the loop nest itself, gives the two runs different values.
constexpr unsigned char kGuardInterp = 0xCD;
constexpr unsigned char kGuardEmu = 0xFF;
constexpr unsigned char kPoisonFloat = 0xFF;  // all ones: a NaN in every floating type
constexpr unsigned char kPoisonInt = 0xA5;

// One allocation as the kernel sees it: a copy with guard bytes around it, aligned like the
// original modulo 256 (a device allocation is 256-byte aligned; so are the vector accesses' rules).
struct Copy {
  std::unique_ptr<unsigned char[]> mem;
  unsigned char* data = nullptr;
  size_t bytes = 0;

  unsigned char guard = 0;

  Copy(const unsigned char* base, size_t n, bool poison, unsigned char poison_byte, unsigned char guard_byte)
      : bytes(n), guard(guard_byte) {
    mem = std::make_unique<unsigned char[]>(n + 2 * kGuard + 256);
    const auto raw = reinterpret_cast<uintptr_t>(mem.get()) + kGuard;
    const uintptr_t want = reinterpret_cast<uintptr_t>(base) % 256;
    const uintptr_t at = raw + ((want + 256 - raw % 256) % 256);
    data = reinterpret_cast<unsigned char*>(at);
    std::memset(data - kGuard, guard, kGuard);
    std::memset(data + n, guard, kGuard);
    if (poison)
      std::memset(data, poison_byte, n);
    else if (n)
      std::memcpy(data, base, n);
  }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (data[-static_cast<ptrdiff_t>(kGuard) + static_cast<ptrdiff_t>(i)] != guard || data[bytes + i] != guard)
        return false;
    return true;
  }
};

// While alive, a SIGSEGV or SIGBUS first writes `message` to stderr, then goes to the handler that
// was there before (a sanitizer's, or the default action: the process dies as it would have). The
// fenced runs below turn an out-of-range access into a fault, and this names the kernel. One at a
// time (the checks run on one thread); a fault ends the test binary, so later tests do not run.
class FaultNote {
 public:
  explicit FaultNote(std::string message) : message_(std::move(message)) {
    struct sigaction sa {};
    sa.sa_handler = &FaultNote::on_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv_);
    sigaction(SIGBUS, &sa, &old_bus_);
    current_.store(this);
  }
  ~FaultNote() {
    current_.store(nullptr);
    sigaction(SIGSEGV, &old_segv_, nullptr);
    sigaction(SIGBUS, &old_bus_, nullptr);
  }
  FaultNote(const FaultNote&) = delete;
  FaultNote& operator=(const FaultNote&) = delete;

 private:
  static void on_fault(int sig) {
    const FaultNote* note = current_.load();
    if (note == nullptr) {
      signal(sig, SIG_DFL);
      return;  // the faulting access runs again, under the default action
    }
    const ssize_t ignored = write(2, note->message_.data(), note->message_.size());
    (void)ignored;
    // Back to the earlier handler; returning makes the faulting access run again, under it.
    sigaction(sig, sig == SIGSEGV ? &note->old_segv_ : &note->old_bus_, nullptr);
  }
  static inline std::atomic<const FaultNote*> current_{nullptr};  // lock-free: read in the handler
  std::string message_;
  struct sigaction old_segv_ {
  }, old_bus_{};
};

// One allocation placed against inaccessible pages (PROT_NONE before and after its pages), at the
// start of its pages or at their end, keeping the original's alignment modulo 32 (the widest
// vector access is 16 bytes): a read or write outside it by more than that slack (under 32 bytes)
// faults. The guard bytes above catch stray
// writes but not reads whose value goes unused (a vector load of both sides of a select, say);
// a run on these fenced copies does.
class FencedCopy {
 public:
  FencedCopy(const unsigned char* base, size_t n, bool poison, unsigned char poison_byte, bool at_end) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    inner_ = (n + 256 + page - 1) / page * page;
    total_ = inner_ + 2 * page;
    void* m = mmap(nullptr, total_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::runtime_error("cuda_kernel_check: mmap failed");
    mem_ = static_cast<unsigned char*>(m);
    if (mprotect(mem_ + page, inner_, PROT_READ | PROT_WRITE) != 0) {
      munmap(mem_, total_);
      throw std::runtime_error("cuda_kernel_check: mprotect failed");
    }
    const uintptr_t want = reinterpret_cast<uintptr_t>(base) % 32;
    const auto lo = reinterpret_cast<uintptr_t>(mem_ + page), hi = lo + inner_;
    data_ = reinterpret_cast<unsigned char*>(at_end ? ((hi - n - want) & ~uintptr_t{31}) + want : lo + want);
    if (poison)
      std::memset(data_, poison_byte, n);
    else if (n)
      std::memcpy(data_, base, n);
  }
  ~FencedCopy() { munmap(mem_, total_); }
  FencedCopy(const FencedCopy&) = delete;
  FencedCopy& operator=(const FencedCopy&) = delete;
  unsigned char* data() const { return data_; }

 private:
  unsigned char* mem_ = nullptr;
  unsigned char* data_ = nullptr;
  size_t inner_ = 0, total_ = 0;
};

struct Storage {
  const unsigned char* base = nullptr;
  size_t bytes = 0;
  bool written = false;          // some output param points into it
  bool read = false;             // some input param points into it
  DType dtype = DType::Float32;  // of the first output param into it
};

// An element as a double, read as the interpreter reads caller memory.
double element(const unsigned char* p, DType t) {
  const dsl::Scalar v = dsl::read_element(t, p, 0);
  return dsl::is_floating(t) ? v.f : static_cast<double>(v.i);
}

bool all_bytes(const unsigned char* p, size_t n, unsigned char b) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != b) return false;
  return true;
}

// The launch shape as the device path computes it (jit::cuda_launch_shape), from the ABI slots.
jit::CudaLaunchShape launch_shape(const dsl::LoweredFunc& f, const std::vector<dsl::ArgValue>& args) {
  std::vector<sched::KernelArg> ka(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const dsl::Param& p = f.params[i];
    if (p.kind == dsl::ParamKind::Buffer) {
      ka[i].kind = sched::KernelArg::Kind::Buffer;
    } else if (dsl::is_floating(p.dtype)) {
      ka[i].kind = sched::KernelArg::Kind::Float;
      ka[i].f = args[i].f64;
    } else {
      ka[i].i = args[i].i64;
    }
  }
  return jit::cuda_launch_shape(f, ka);
}

}  // namespace

jit::Tensor bind_view(const std::vector<jit::Tensor>& slots, const jit::ValueLayouts& lay, int v) {
  const auto i = static_cast<size_t>(v);
  if (!lay.is_view[i]) return slots[i];
  jit::Tensor t = slots[static_cast<size_t>(lay.root[i])];
  t.sizes = lay.layout[i].sizes;
  t.strides = lay.layout[i].strides;
  t.offset += lay.layout[i].offset;
  return t;
}

KernelCall kernel_call(const std::vector<sched::KernelArg>& args,
                       const std::function<jit::Tensor(int value)>& tensor_of) {
  KernelCall call;
  for (const sched::KernelArg& a : args) {
    dsl::ArgValue x;
    call.spans.emplace_back();
    if (a.kind == sched::KernelArg::Kind::Buffer) {
      const jit::Tensor t = tensor_of(a.value);
      x.ptr = t.data();
      call.spans.back() = span_of(t);
    } else if (a.kind == sched::KernelArg::Kind::Int) {
      x.i64 = a.i;
    } else {
      x.f64 = a.f;
    }
    call.args.push_back(x);
  }
  return call;
}

double median_magnitude(std::vector<double> values) {
  std::vector<double> mags;
  mags.reserve(values.size());
  for (const double v : values)
    if (std::isfinite(v)) mags.push_back(std::fabs(v));
  if (mags.empty()) return 0;
  std::nth_element(mags.begin(), mags.begin() + static_cast<std::ptrdiff_t>(mags.size() / 2), mags.end());
  return mags[mags.size() / 2];
}

double result_tolerance(DType t, double ref, double typical) {
  const double scale = 1 + std::fabs(ref) + typical;
  switch (t) {
    case DType::Float16:
      return 2e-3 * scale;
    case DType::BFloat16:
      return 1.6e-2 * scale;
    case DType::Float32:
      return 2e-5 * scale;
    case DType::Float64:
      return 1e-12 * scale;
    default:
      return 0;
  }
}

std::vector<unsigned char> random_bytes(DType t, int64_t numel, std::mt19937_64& rng, bool specials) {
  std::vector<unsigned char> bytes(static_cast<size_t>(numel * dtype_size(t)) + 1);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::uniform_int_distribution<int> pick(0, 39);
  std::uniform_int_distribution<int64_t> small(-1000, 1000);
  for (int64_t i = 0; i < numel; ++i) {
    unsigned char* p = bytes.data() + i * dtype_size(t);
    const int k = specials ? pick(rng) : 39;
    double v = normal(rng);
    if (k == 0) v = std::numeric_limits<double>::quiet_NaN();
    if (k == 1) v = std::numeric_limits<double>::infinity();
    if (k == 2) v = -0.0;
    if (k == 3) v = 3e38;
    int64_t iv = small(rng);
    if (k == 4) iv = std::numeric_limits<int32_t>::min();
    if (k == 5) iv = 3000000001LL;
    switch (t) {
      case DType::Bool:
        *p = static_cast<unsigned char>(iv > 0);
        break;
      case DType::Int32: {
        const auto x = static_cast<int32_t>(iv);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::Int64:
        std::memcpy(p, &iv, 8);
        break;
      case DType::Float16: {
        const uint16_t h = dsl::float_to_half_bits(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::BFloat16: {
        const uint16_t h = dsl::float_to_bf16_bits(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::Float32: {
        const auto x = static_cast<float>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::Float64:
        std::memcpy(p, &v, 8);
        break;
      case DType::UInt8:
      case DType::Int8:
        *p = static_cast<unsigned char>(static_cast<uint64_t>(iv));  // wraps
        break;
      case DType::Int16: {
        const auto x = static_cast<uint16_t>(static_cast<uint64_t>(iv));
        std::memcpy(p, &x, 2);
        break;
      }
    }
  }
  return bytes;
}

void expect_cuda_text_matches_interpreter(const dsl::LoweredFunc& f, const std::vector<dsl::ArgValue>& args,
                                          const std::vector<BufferSpan>& spans, const std::string& context) {
  const std::string what = "kernel " + f.name + (context.empty() ? "" : " (" + context + ")");
  ASSERT_EQ(args.size(), f.params.size()) << what;
  ASSERT_EQ(spans.size(), f.params.size()) << what;

  // The allocations the buffers point into, each once.
  std::vector<Storage> storages;
  std::vector<int> storage_of(f.params.size(), -1);
  for (size_t i = 0; i < f.params.size(); ++i) {
    const dsl::Param& p = f.params[i];
    if (p.kind != dsl::ParamKind::Buffer) continue;
    const auto* base = static_cast<const unsigned char*>(spans[i].base);
    const auto* ptr = static_cast<const unsigned char*>(args[i].ptr);
    ASSERT_TRUE(base && ptr >= base && ptr <= base + spans[i].bytes)
        << what << ": buffer " << p.name << " does not point into the allocation given for it";
    int s = -1;
    for (size_t k = 0; k < storages.size(); ++k)
      if (storages[k].base == base) s = static_cast<int>(k);
    if (s < 0) {
      storages.push_back({base, spans[i].bytes, false, false, p.dtype});
      s = static_cast<int>(storages.size()) - 1;
    }
    Storage& st = storages[static_cast<size_t>(s)];
    if (p.is_output && !st.written) st.dtype = p.dtype;
    (p.is_output ? st.written : st.read) = true;
    storage_of[i] = s;
  }

  // Two identical sets of copies: outputs poisoned unless the same allocation is also read.
  auto make_copies = [&](unsigned char guard) {
    std::vector<Copy> copies;
    for (const Storage& st : storages) {
      const bool poison = st.written && !st.read;
      copies.emplace_back(st.base, st.bytes, poison, dsl::is_floating(st.dtype) ? kPoisonFloat : kPoisonInt, guard);
    }
    return copies;
  };
  // The arguments with each buffer pointing into `data_of(storage)` at its offset in the original.
  auto args_at = [&](const std::function<unsigned char*(size_t)>& data_of) {
    std::vector<dsl::ArgValue> a = args;
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (storage_of[i] < 0) continue;
      const auto s = static_cast<size_t>(storage_of[i]);
      a[i].ptr = data_of(s) + (static_cast<const unsigned char*>(args[i].ptr) - storages[s].base);
    }
    return a;
  };
  std::vector<Copy> interp = make_copies(kGuardInterp);
  std::vector<Copy> emu = make_copies(kGuardEmu);
  dsl::interpret(f, args_at([&](size_t s) { return interp[s].data; }));

  const jit::cuda::CudaSource src = jit::cuda::print_cuda_source(f);
  std::shared_ptr<const simt::Module> module;
  try {
    module = simt::module_for(src.source, {src.name}, jit::cuda::embedded_helpers());
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": the printed CUDA C++ does not build for the host: " << e.what();
    return;
  }
  // A kernel that checks indices takes the device's error word last (jit/cuda/cuda_printer.h); the
  // interpreter raised on any bad index above, so nothing may be reported here.
  const bool checks_indices = dsl::calls_intrinsic(f.body, dsl::Intrinsic::CheckIndex);
  // Launches the printed kernel on `a`, its threads in the order `seed` picks between
  // synchronization points; false (after a test failure) when the emulator refuses.
  auto launch = [&](std::vector<dsl::ArgValue> a, const std::string& run, uint64_t seed) {
    std::array<long long, 4> error_word{};
    if (checks_indices) a.emplace_back().ptr = error_word.data();
    std::vector<void*> params(a.size());
    for (size_t i = 0; i < a.size(); ++i) params[i] = &a[i];  // the 8-byte ABI slots
    const auto no_report = [&] {
      EXPECT_EQ(error_word, (std::array<long long, 4>{})) << what << run << ": reported an index out of range";
    };
    try {
      const jit::CudaLaunchShape shape = launch_shape(f, args);
      module->launch(src.name, {shape.grid[0], shape.grid[1], shape.grid[2]},
                     {shape.block[0], shape.block[1], shape.block[2]}, params.data(), seed);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << run << ": " << e.what() << "\n  source: " << module->source_path();
      return false;
    }
    no_report();
    return true;
  };
  if (!launch(args_at([&](size_t s) { return emu[s].data; }), "", 1)) return;

  // The same launch on fenced copies, placed at the start and then at the end of their pages: an
  // access outside an allocation faults (FaultNote names the kernel first).
  for (const bool at_end : {false, true}) {
    std::vector<std::unique_ptr<FencedCopy>> fenced;
    for (const Storage& st : storages) {
      const unsigned char poison = dsl::is_floating(st.dtype) ? kPoisonFloat : kPoisonInt;
      fenced.push_back(std::make_unique<FencedCopy>(st.base, st.bytes, st.written && !st.read, poison, at_end));
    }
    const std::string where = at_end ? "end" : "start";
    const FaultNote note("[cuda_kernel_check] " + what + ": fault in the fenced run (copies at the " + where +
                         " of their pages): an access outside an allocation\n  source: " + module->source_path() +
                         "\n");
    // (each in another thread order: a race the first order hid may fault here)
    if (!launch(args_at([&](size_t s) { return fenced[s]->data(); }), " (fenced run, " + where + ")", at_end ? 3 : 2))
      return;
  }

  for (size_t s = 0; s < storages.size(); ++s) {
    const Storage& st = storages[s];
    const Copy& e = emu[s];
    EXPECT_TRUE(e.guards_intact()) << what << ": wrote outside an allocation of " << st.bytes
                                   << " bytes\n  source: " << module->source_path();
    if (!st.written) {
      EXPECT_EQ(std::memcmp(e.data, st.base, st.bytes), 0)
          << what << ": changed an input\n  source: " << module->source_path();
      continue;
    }
    const size_t es = static_cast<size_t>(dsl::dtype_size(st.dtype));
    const unsigned char poison = dsl::is_floating(st.dtype) ? kPoisonFloat : kPoisonInt;
    const bool poisoned = !st.read;
    std::vector<double> interpreted;
    for (size_t k = 0; k + es <= st.bytes; k += es) {
      if (!(poisoned && all_bytes(interp[s].data + k, es, poison)))
        interpreted.push_back(element(interp[s].data + k, st.dtype));
    }
    const double typical = median_magnitude(interpreted);
    int bad = 0;
    std::string first;
    for (size_t k = 0; k + es <= st.bytes; k += es) {
      const unsigned char* pe = e.data + k;
      const unsigned char* pi = interp[s].data + k;
      std::string why;
      const bool e_unwritten = poisoned && all_bytes(pe, es, poison);
      const bool i_unwritten = poisoned && all_bytes(pi, es, poison);
      const double ve = element(pe, st.dtype), vi = element(pi, st.dtype);
      if (e_unwritten != i_unwritten) {
        why = e_unwritten ? "not written by the CUDA text" : "written only by the CUDA text";
      } else if (!e_unwritten) {
        if (std::isnan(vi) != std::isnan(ve))
          why = "NaN in one only";
        else if (!std::isnan(vi) && ve != vi && !(std::fabs(ve - vi) <= result_tolerance(st.dtype, vi, typical)))
          why = "differs";
      }
      if (why.empty()) continue;
      if (++bad == 1)
        first = "element " + std::to_string(k / es) + ": CUDA text " + std::to_string(ve) + ", interpreter " +
                std::to_string(vi) + " (" + why + ")";
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << st.bytes / es << " elements of a "
                      << dsl::dtype_name(st.dtype) << " output differ; first " << first
                      << "\n  source: " << module->source_path();
  }
}

}  // namespace flow::test

#include "jit/cuda_launch.h"

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "dsl/expr.h"
#include "dsl/interpreter.h"
#include "dsl/ir_visitor.h"
#include "jit/cuda/cuda_compile.h"
#include "jit/cuda/cuda_printer.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"
#include "runtime/device_error.h"

namespace flow::jit {

namespace rc = runtime::cuda;
static_assert(rc::kIndexReportTag == dsl::kCheckIndexRuntimeError, "CheckIndex's exception tag, read by both");

namespace {

// The cubin a CompiledKernel carries, when its type has one (the NVRTC backend keeps it in
// CompiledKernel::cubin); otherwise empty, and launch_cuda_func compiles from the loop nest.
template <typename K>
auto cubin_of(const K& k, int) -> decltype(void(k.cubin), static_cast<const std::string*>(nullptr)) {
  return &k.cubin;
}
template <typename K>
const std::string* cubin_of(const K&, long) {
  static const std::string none;
  return &none;
}

struct LoadedKernel {
  std::shared_ptr<const rc::CudaModule> module;
  rc::Function function = nullptr;
  std::string entry;
  bool checks_indices = false;  // takes the device's error word after its parameters (cuda_printer.h)
};

struct LoadedKernels {
  std::mutex mu;
  std::map<std::pair<int, std::string>, LoadedKernel> by_key;
};

LoadedKernels& loaded_kernels() {
  static auto* k = new LoadedKernels();  // never destroyed: modules outlive static destructors
  return *k;
}

const LoadedKernel& load(const dsl::LoweredFunc& f, const std::string& key, const std::string& image) {
  rc::require_cuda();
  const int device = rc::current_device();
  LoadedKernels& lk = loaded_kernels();
  std::lock_guard<std::mutex> lock(lk.mu);
  auto it = lk.by_key.find({device, key});
  if (it != lk.by_key.end()) return it->second;
  LoadedKernel k;
  const std::string& arch = rc::device_props(device).arch;
  if (image.empty()) {
    const cuda::CudaCompiled c = cuda::cuda_compile(f, arch);
    k.entry = c.kernel.name;
    k.module =
        std::make_shared<const rc::CudaModule>(c.cubin.empty() ? c.ptx : c.cubin, f.name + " (" + arch + ")", device);
  } else {
    k.entry = cuda::print_cuda_source(f).name;
    try {
      k.module = std::make_shared<const rc::CudaModule>(image, f.name + " (key " + key + ")", device);
    } catch (const rc::CudaError& e) {
      throw rc::CudaError(std::string(e.what()) + " [kernel " + f.name + " on device " + std::to_string(device) + ", " +
                              arch + ": was it compiled for this architecture? CompileOptions::cuda_arch]",
                          e.code());
    }
  }
  k.function = k.module->function(k.entry);
  k.checks_indices = dsl::calls_intrinsic(f.body, dsl::Intrinsic::CheckIndex);
  return lk.by_key.emplace(std::make_pair(device, key), std::move(k)).first->second;
}

[[noreturn]] void bad(const dsl::LoweredFunc& f, const std::string& msg) {
  throw std::invalid_argument("flow: CUDA kernel " + f.name + ": " + msg);
}

void check_args(const dsl::LoweredFunc& f, const std::vector<sched::KernelArg>& args) {
  if (f.target != dsl::Target::CUDA) bad(f, "is not a CUDA kernel");
  if (args.size() != f.params.size())
    bad(f, std::to_string(args.size()) + " arguments for " + std::to_string(f.params.size()) + " parameters");
  for (size_t i = 0; i < args.size(); ++i) {
    const bool buf_param = f.params[i].kind == dsl::ParamKind::Buffer;
    const bool buf_arg = args[i].kind == sched::KernelArg::Kind::Buffer;
    if (buf_param != buf_arg)
      bad(f, "parameter " + f.params[i].name + " is a " + (buf_param ? "buffer" : "scalar") + " but its argument is " +
                 (buf_arg ? "a buffer" : "a scalar"));
    if (!buf_param && !dsl::is_floating(f.params[i].dtype) && args[i].kind == sched::KernelArg::Kind::Float)
      bad(f, "integer parameter " + f.params[i].name + " has a floating argument");
  }
}

}  // namespace

bool CudaLaunchShape::empty() const {
  for (int d = 0; d < 3; ++d)
    if (grid[d] == 0 || block[d] == 0) return true;
  return false;
}

CudaLaunchShape cuda_launch_shape(const dsl::LoweredFunc& f, const std::vector<sched::KernelArg>& args) {
  check_args(f, args);
  auto lookup = [&](const std::string& var) -> dsl::Scalar {
    for (size_t i = 0; i < f.params.size(); ++i) {
      const dsl::Param& p = f.params[i];
      if (p.kind != dsl::ParamKind::Scalar || p.name != var) continue;
      dsl::Scalar s;
      s.type = p.dtype;
      if (dsl::is_floating(p.dtype)) {
        s.f = args[i].kind == sched::KernelArg::Kind::Float ? args[i].f : static_cast<double>(args[i].i);
      } else {
        s.i = args[i].i;
      }
      return s;
    }
    bad(f, "launch shape uses '" + var + "', which is not a scalar parameter");
  };
  auto eval = [&](const dsl::Expr& e, const char* what, int d) -> int64_t {
    if (!e.defined()) return 1;
    const dsl::Scalar v = dsl::eval_expr(e, lookup, nullptr);
    const std::string dim = std::string(what) + "." + "xyz"[d];
    if (dsl::is_floating(v.type)) bad(f, dim + " is not an integer");
    if (v.i < 0) bad(f, dim + " = " + std::to_string(v.i) + " is negative");
    return v.i;
  };
  CudaLaunchShape s;
  for (int d = 0; d < 3; ++d) {
    s.grid[d] = eval(f.grid[d], "grid", d);
    s.block[d] = eval(f.block[d], "block", d);
  }
  const int64_t grid_max[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
  for (int d = 0; d < 3; ++d) {
    if (s.grid[d] > grid_max[d])
      bad(f, std::string("grid.") + "xyz"[d] + " = " + std::to_string(s.grid[d]) + " exceeds the CUDA limit " +
                 std::to_string(grid_max[d]));
    if (s.block[d] > 1024)
      bad(f, std::string("block.") + "xyz"[d] + " = " + std::to_string(s.block[d]) + " exceeds 1024");
  }
  if (s.block[0] * s.block[1] * s.block[2] > 1024)
    bad(f, "block " + std::to_string(s.block[0]) + " x " + std::to_string(s.block[1]) + " x " +
               std::to_string(s.block[2]) + " exceeds 1024 threads");
  if (s.block[2] > 64) bad(f, "block.z = " + std::to_string(s.block[2]) + " exceeds the CUDA limit 64");
  return s;
}

void launch_cuda_func(const dsl::LoweredFunc& f, const std::string& key, const std::string& image,
                      const std::vector<sched::KernelArg>& args, const std::vector<const Tensor*>& values) {
  const CudaLaunchShape shape = cuda_launch_shape(f, args);
  if (shape.empty()) return;
  const int device = rc::current_device();
  std::vector<dsl::ArgValue> slots(args.size());
  std::vector<void*> params(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const dsl::Param& p = f.params[i];
    const sched::KernelArg& a = args[i];
    if (a.kind == sched::KernelArg::Kind::Buffer) {
      const Tensor* t = a.value >= 0 && static_cast<size_t>(a.value) < values.size() ? values[a.value] : nullptr;
      if (!t || !t->storage) bad(f, "buffer " + p.name + " (value %" + std::to_string(a.value) + ") is not bound");
      if (t->storage->device() != runtime::DeviceType::CUDA)
        bad(f, "buffer " + p.name + " (value %" + std::to_string(a.value) + ") is a " +
                   runtime::device_type_name(t->storage->device()) + " tensor; CUDA kernels need cuda tensors");
      if (t->storage->device_index() != device)
        bad(f, "buffer " + p.name + " is on cuda:" + std::to_string(t->storage->device_index()) +
                   " but the current device is cuda:" + std::to_string(device));
      if (t->dtype != p.dtype)
        bad(f, "buffer " + p.name + " has dtype " + dsl::dtype_name(t->dtype) + ", the kernel expects " +
                   dsl::dtype_name(p.dtype));
      slots[i].ptr = t->data();
    } else if (dsl::is_floating(p.dtype)) {
      slots[i].f64 = a.kind == sched::KernelArg::Kind::Float ? a.f : static_cast<double>(a.i);
    } else {
      slots[i].i64 = a.i;
    }
    params[i] = &slots[i];
  }
  const LoadedKernel& k = load(f, key, image);
  long long* error_word = nullptr;
  if (k.checks_indices) {
    error_word = rc::device_error_word(device, rc::current_stream());
    params.push_back(&error_word);
  }
  const std::array<unsigned, 3> grid = {static_cast<unsigned>(shape.grid[0]), static_cast<unsigned>(shape.grid[1]),
                                        static_cast<unsigned>(shape.grid[2])};
  const std::array<unsigned, 3> block = {static_cast<unsigned>(shape.block[0]), static_cast<unsigned>(shape.block[1]),
                                         static_cast<unsigned>(shape.block[2])};
  rc::launch(k.function, grid, block, 0, rc::current_stream(), params.data(), f.name);
}

void launch_cuda(const CompiledKernel& k, const std::vector<sched::KernelArg>& args,
                 const std::vector<const Tensor*>& values) {
  const std::string& image = *cubin_of(k, 0);
  launch_cuda_func(k.scheduled.func, image.empty() ? k.key_hex + "/compiled-at-launch" : k.key_hex, image, args,
                   values);
}

size_t loaded_cuda_kernels() {
  LoadedKernels& lk = loaded_kernels();
  std::lock_guard<std::mutex> lock(lk.mu);
  return lk.by_key.size();
}

}  // namespace flow::jit

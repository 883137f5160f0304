#include "jit/eager.h"

#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "dsl/op_table.h"
#include "jit/backend.h"
#include "jit/compile.h"
#include "jit/eager_cat.h"
#include "jit/eager_layout.h"

namespace flow::jit {

namespace {

// Executables by signature (op, attrs, argument dtypes/shapes/strides, scalar kinds): a repeated
// eager call skips graph building, fusion, scheduling and the kernel lookup. Scalars are kernel
// parameters, so their values are not part of the signature, but for what the op's infer checks
// of them (OpDef::scalar_key).
struct EagerPlan {
  std::shared_ptr<Executable> exe;
  std::vector<int> constant_ids;  // graph value of each scalar argument, in argument order
};

class EagerPlanCache {
 public:
  static constexpr size_t kCapacity = 4096;

  std::shared_ptr<const EagerPlan> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void insert(const std::string& key, std::shared_ptr<const EagerPlan> plan) {
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= kCapacity) map_.clear();  // simple bound; signatures repeat in practice
    map_[key] = std::move(plan);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const EagerPlan>> map_;
};

EagerPlanCache& plan_cache() {
  static EagerPlanCache cache;
  return cache;
}

void put_i64(std::string& key, int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string signature(const std::string& op, const std::vector<EagerArg>& args, const dsl::Attrs& attrs) {
  std::string key = op;
  key.push_back('\0');
  const dsl::ScalarKeyFn& scalar_key = dsl::lookup_op(op).scalar_key;
  for (size_t i = 0; i < args.size(); ++i) {
    const EagerArg& a = args[i];
    if (const auto* t = std::get_if<Tensor>(&a)) {
      key.push_back('T');
      key.push_back(static_cast<char>(t->device()));
      key.push_back(static_cast<char>(t->dtype));
      put_i64(key, static_cast<int64_t>(t->sizes.size()));
      for (int64_t s : t->sizes) put_i64(key, s);
      for (size_t d = 0; d < t->sizes.size(); ++d) put_i64(key, t->sizes[d] == 1 ? 0 : t->strides[d]);
    } else {
      const ScalarArg& s = std::get<ScalarArg>(a);
      key.push_back('S');
      key.push_back(static_cast<char>(s.dtype));
      if (scalar_key) key.push_back(scalar_key(static_cast<int>(i), s.value));
    }
  }
  for (const auto& [k, v] : attrs) {
    key += k;
    key.push_back('=');
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            key += x;
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            for (int64_t i : x) put_i64(key, i);
          } else {
            const double d = static_cast<double>(x);
            key.append(reinterpret_cast<const char*>(&d), sizeof d);
          }
        },
        v);
    key.push_back(';');
  }
  return key;
}

// torch's CPU scalars: a 0-dim CPU tensor may meet CUDA tensors (cuda_x * torch.tensor(2.0)); it is
// copied to the device. Any other mix of devices stays an error (eager_op). Returns whether
// `args` had such a tensor and `moved` holds the arguments to use instead.
bool move_cpu_scalars(const std::vector<EagerArg>& args, std::vector<EagerArg>& moved) {
  const auto is_cpu_scalar = [](const Tensor& t) { return t.device() == runtime::DeviceType::CPU && t.sizes.empty(); };
  bool cuda = false, cpu_scalar = false;
  for (const auto& a : args) {
    if (const auto* t = std::get_if<Tensor>(&a)) {
      cuda = cuda || t->device() == runtime::DeviceType::CUDA;
      cpu_scalar = cpu_scalar || is_cpu_scalar(*t);
    }
  }
  if (!cuda || !cpu_scalar) return false;
  moved = args;
  for (auto& a : moved) {
    if (const auto* t = std::get_if<Tensor>(&a); t && is_cpu_scalar(*t)) a = to_device(*t, runtime::DeviceType::CUDA);
  }
  return true;
}

std::vector<Tensor> run_op(const std::string& op, const std::vector<EagerArg>& args, const dsl::Attrs& attrs);

}  // namespace

std::vector<Tensor> eager_op(const std::string& op, const std::vector<EagerArg>& given, const dsl::Attrs& attrs) {
  std::vector<EagerArg> moved;
  const std::vector<EagerArg>& args = move_cpu_scalars(given, moved) ? moved : given;
  // Results keep their inputs' memory order, as torch's (jit/eager_layout.h).
  if (const auto call = permuted_call(op, args, attrs)) {
    std::vector<Tensor> results = run_op(op, call->args, call->attrs);
    for (Tensor& r : results) r = unpermuted_view(r, call->order);
    return results;
  }
  return run_op(op, args, attrs);
}

namespace {

std::vector<Tensor> run_op(const std::string& op, const std::vector<EagerArg>& args, const dsl::Attrs& attrs) {
  if (op == "cat") {  // copies rather than a kernel per input count (jit/eager_cat.h)
    std::vector<Tensor> inputs;
    for (const auto& a : args)
      if (const auto* t = std::get_if<Tensor>(&a)) inputs.push_back(*t);
    if (inputs.size() == args.size())
      if (std::optional<Tensor> out = cat_by_copies(inputs, attrs)) return {*out};
  }
  const std::string key = signature(op, args, attrs);
  if (auto plan = plan_cache().find(key)) {
    std::vector<Tensor> tensors;
    std::vector<std::pair<int, double>> constants;
    size_t c = 0;
    for (const auto& a : args) {
      if (const auto* t = std::get_if<Tensor>(&a)) {
        tensors.push_back(*t);
      } else {
        constants.emplace_back(plan->constant_ids[c++], std::get<ScalarArg>(a).value);
      }
    }
    return plan->exe->run(tensors, constants);
  }
  dsl::Graph g;
  std::vector<int> ids;
  std::vector<Tensor> tensors;
  std::vector<std::vector<int64_t>> strides;
  for (const auto& a : args) {
    if (const auto* t = std::get_if<Tensor>(&a)) {
      ids.push_back(g.add_input({t->sizes, t->dtype}));
      tensors.push_back(*t);
      strides.push_back(t->strides);
    } else {
      const auto& s = std::get<ScalarArg>(a);
      ids.push_back(g.add_constant(s.value, s.dtype, /*wrapped_number=*/true));
    }
  }
  for (int v : g.add_op(op, ids, attrs)) g.mark_output(v);
  CompileOptions opt;
  opt.inline_constants = false;  // scalars are kernel parameters: one kernel for every value
  // The op runs where its tensors are; mixing devices is an error, as in torch (CPU scalars aside).
  for (const auto& t : tensors) {
    if (t.device() != tensors.front().device())
      throw dsl::OpError(
          dsl::OpError::Kind::Value,
          "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
  }
  if (!tensors.empty() && tensors.front().device() == runtime::DeviceType::CUDA) {
    opt.target = dsl::Target::CUDA;
    opt.cuda_arch = default_cuda_arch();
  }
  auto plan = std::make_shared<EagerPlan>();
  plan->exe = compile(g, strides, opt);
  for (size_t i = 0; i < args.size(); ++i)
    if (std::holds_alternative<ScalarArg>(args[i])) plan->constant_ids.push_back(ids[i]);
  plan_cache().insert(key, plan);
  return plan->exe->run(tensors);
}

}  // namespace

Tensor eager_view(const std::string& op, const Tensor& src, const dsl::Attrs& attrs) {
  const dsl::OpDef& def = dsl::lookup_op(op);
  if (def.pattern != dsl::OpPattern::View)
    throw dsl::OpError(dsl::OpError::Kind::Value, "'" + op + "' is not a view op");
  // Type inference through a one-op graph: the same checks and messages as everywhere else.
  dsl::Graph g;
  const int out = g.add(op, {g.add_input({src.sizes, src.dtype})}, attrs);
  const dsl::Attrs& canonical = g.node(g.value(out).producer).attrs;
  auto alias = [&](const Tensor& t, const dsl::Layout& l) {
    Tensor v = t;
    v.sizes = l.sizes;
    v.strides = l.strides;
    v.offset = l.offset;
    return v;
  };
  if (auto l = def.view(dsl::Layout{src.sizes, src.strides, src.offset}, canonical)) return alias(src, *l);
  if (op == "view")
    throw dsl::OpError(dsl::OpError::Kind::Value,
                       "view size is not compatible with input tensor's size and stride (at least one dimension spans "
                       "across two contiguous subspaces). Use .reshape(...) instead.");
  const Tensor copy = eager_contiguous(src, src.dtype);
  return alias(copy, *def.view(dsl::Layout{copy.sizes, copy.strides, copy.offset}, canonical));
}

Tensor eager_contiguous(const Tensor& src, dsl::DType dtype) {
  // run_op, not eager_op: a contiguous result whatever src's memory order (and one tensor has no
  // CPU scalar to move).
  return run_op("cast", {src}, {{"dtype", std::string(dsl::dtype_name(dtype))}}).at(0);
}

LaunchCounters launch_counters() {
  return {total_launches()};
}
void reset_launch_counters() {
  reset_total_launches();
}

}  // namespace flow::jit

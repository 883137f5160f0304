// Note: the execution side of flow._C: eager ops, compile() and the Executable, the kernel-cache
// and launch counters. The GIL is released around eager ops and runs (arguments are converted
// first; jit::Tensor values share storage by shared_ptr, so nothing Python-owned is touched while
// released). Executable.run checks its arguments against the graph's inputs and the strides it was
// compiled for before calling into C++, so a wrong call is a Python exception, not a bad memory
// access.
#include <pybind11/stl.h>

#include <memory>
#include <sstream>

#include "bind_common.h"
#include "dsl/op_table.h"
#include "jit/compile.h"
#include "jit/eager.h"
#include "jit/kernel_cache.h"
#include "jit/profile.h"
#include "py_executable.h"
#include "runtime/cublaslt.h"
#include "runtime/cuda_allocator.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"
#include "runtime/cudnn.h"
#include "runtime/onednn.h"

namespace flow::python {

namespace {

// flow.cuda.Event: the driver event is made on the first record(), so an Event can be constructed
// (as scripts do at the top) on a machine without a GPU.
class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent() {
    if (event_) runtime::cuda::driver::event_destroy(event_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  void record() {
    if (!event_) event_ = runtime::cuda::driver::event_create();
    runtime::cuda::driver::event_record(event_, runtime::cuda::current_stream());
  }
  void synchronize() const {
    if (event_) runtime::cuda::driver::event_synchronize(event_);
  }
  // Milliseconds from this event to `end`, both recorded; waits for `end` to complete (torch
  // raises when it has not: waiting is what every caller does next).
  float elapsed_time(const CudaEvent& end) const {
    if (!event_ || !end.event_)
      throw std::runtime_error("Both events must be recorded before calculating elapsed time.");
    runtime::cuda::driver::event_synchronize(end.event_);
    return runtime::cuda::driver::event_elapsed_ms(event_, end.event_);
  }
  bool recorded() const { return event_ != nullptr; }

 private:
  runtime::cuda::Event event_ = nullptr;
};

}  // namespace

namespace {

using jit::Tensor;

jit::EagerArg eager_arg(const py::handle& h, size_t pos) {
  if (py::isinstance<Tensor>(h)) return py::cast<Tensor>(h);
  if (py::isinstance<py::bool_>(h)) return jit::ScalarArg{py::cast<bool>(h) ? 1.0 : 0.0, dsl::DType::Bool};
  if (py::isinstance<py::int_>(h)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow != 0) throw py::value_error("value cannot be converted to type int64 without overflow");
    return jit::ScalarArg{static_cast<double>(v), dsl::DType::Int64};
  }
  if (py::isinstance<py::float_>(h)) return jit::ScalarArg{py::cast<double>(h), dsl::DType::Float64};
  throw py::type_error("flow._C.eager: argument " + std::to_string(pos) +
                       " must be a Tensor, bool, int or float, not " +
                       std::string(py::str(py::type::of(h).attr("__name__"))));
}

dsl::Target parse_target(const std::string& s) {
  if (s == "cpu") return dsl::Target::CPU;
  if (s == "cuda") return dsl::Target::CUDA;
  throw py::value_error("flow.compile: unknown target '" + s + "' (expected 'cpu' or 'cuda')");
}

py::dict cache_stats() {
  const jit::KernelCacheStats s = jit::global_kernel_cache().stats();
  py::dict d;
  d["memory_hits"] = s.memory_hits;
  d["disk_hits"] = s.disk_hits;
  d["misses"] = s.misses;
  d["stores"] = s.stores;
  d["corrupt_entries"] = s.corrupt_entries;
  d["readonly_hits"] = s.readonly_hits;
  d["evicted"] = s.evicted;
  d["compile_seconds"] = s.compile_seconds;
  return d;
}

}  // namespace

void bind_jit(py::module_& m) {
  m.def(
      "eager",
      [](const std::string& op, const py::list& args, const py::dict& attrs) {
        std::vector<jit::EagerArg> converted;
        converted.reserve(args.size());
        for (size_t i = 0; i < args.size(); ++i) converted.push_back(eager_arg(args[i], i));
        const dsl::Attrs a = attrs_from_dict(attrs);
        py::gil_scoped_release release;
        return jit::eager_op(op, converted, a);
      },
      py::arg("op"), py::arg("args"), py::arg("attrs") = py::dict(),
      "Runs one op eagerly; Python bool/int/float arguments are scalars (wrapped numbers)");
  m.def(
      "view",
      [](const std::string& op, const Tensor& t, const py::dict& attrs) {
        const dsl::Attrs a = attrs_from_dict(attrs);
        py::gil_scoped_release release;
        return jit::eager_view(op, t, a);
      },
      py::arg("op"), py::arg("tensor"), py::arg("attrs") = py::dict(),
      "Runs a view op eagerly: a zero-copy alias of `tensor` (reshape of an unviewable layout copies)");

  py::class_<PyInputTemplate>(m, "InputTemplate",
                              "A compiled graph's inputs, checked, with the argument slots empty "
                              "(Executable.template)")
      .def_property_readonly("num_inputs", [](const PyInputTemplate& t) { return t.inputs.size(); })
      .def_property_readonly("arg_slots", [](const PyInputTemplate& t) { return t.arg_slots; });

  py::class_<PyExecutable>(m, "Executable", "A compiled graph (flow::jit::Executable)")
      .def("run", &PyExecutable::run, py::arg("inputs"), "Runs the graph on inputs in graph-input order")
      .def("template", &PyExecutable::make_template, py::arg("inputs"), py::arg("arg_slots"),
           "Checks `inputs` (graph-input order) and keeps them with the slots `arg_slots` emptied, for "
           "run_template")
      .def("run_template", &PyExecutable::run_template, py::arg("template"), py::arg("args"),
           "Runs on a template's inputs with `args` in its argument slots (checked; the template keeps "
           "none of them)")
      .def(
          "explain", [](const PyExecutable& e, bool with_source) { return e.exe->explain(with_source); },
          py::arg("with_source") = true)
      .def(
          "profile",
          [](const PyExecutable& e, const std::vector<jit::Tensor>& inputs, int repeats, int warmup) {
            e.check_inputs(inputs);
            std::vector<jit::StepTime> steps;
            {
              py::gil_scoped_release release;
              steps = jit::profile_steps(*e.exe, inputs, repeats, warmup);
            }
            py::list out;
            for (const auto& st : steps) {
              py::dict d;
              d["kind"] = st.kind;
              d["index"] = st.index;
              d["group"] = st.group;
              d["name"] = st.name;
              d["seconds"] = st.seconds;
              out.append(d);
            }
            return out;
          },
          py::arg("inputs"), py::arg("repeats") = 10, py::arg("warmup") = 2,
          "Times every kernel and library call inside real runs (median seconds per step, run order)")
      .def_property_readonly("num_kernels", [](const PyExecutable& e) { return e.exe->num_kernels(); })
      .def_property_readonly("num_compiled", [](const PyExecutable& e) { return e.exe->num_compiled(); })
      .def_property_readonly("num_library_calls", [](const PyExecutable& e) { return e.exe->num_library_calls(); })
      .def_property_readonly("num_folded", [](const PyExecutable& e) { return e.exe->num_folded(); })
      .def_property_readonly("num_channels_last", [](const PyExecutable& e) { return e.exe->num_channels_last(); })
      .def_property_readonly("num_cached_groups", [](const PyExecutable& e) { return e.exe->num_cached_groups(); })
      .def_property_readonly("num_graph_replays", [](const PyExecutable& e) { return e.exe->num_graph_replays(); })
      .def_property_readonly("graph_captured", [](const PyExecutable& e) { return e.exe->graph_captured(); })
      .def_property_readonly("input_strides", [](const PyExecutable& e) { return e.input_strides; })
      .def_property_readonly("graph", [](const PyExecutable& e) { return dsl::Graph(e.exe->graph()); })
      .def("kernels", [](const PyExecutable& e) {
        py::list out;
        for (const auto& k : e.exe->kernels()) {
          py::dict d;
          d["key"] = k->key_hex;
          d["cache_hit"] = k->cache_hit;
          d["compile_seconds"] = k->compile_seconds;
          d["name"] = k->scheduled.func.name;
          d["scheduler"] = k->scheduled.scheduler;
          d["params"] = sched::params_to_json(k->scheduled.params);
          out.append(d);
        }
        return out;
      });

  m.def(
      "compile",
      [](const dsl::Graph& g, const std::vector<std::vector<int64_t>>& input_strides, const std::string& target,
         const std::string& cuda_arch, bool fuse, std::shared_ptr<autotune::TuningDatabase> tuning,
         const std::vector<bool>& frozen_inputs, bool cuda_graphs, const std::string& conv_search) {
        if (input_strides.size() != g.inputs().size()) {
          throw py::value_error("flow.compile: " + std::to_string(g.inputs().size()) + " graph inputs but " +
                                std::to_string(input_strides.size()) + " stride lists");
        }
        for (size_t i = 0; i < input_strides.size(); ++i) {
          const size_t rank = g.value(g.inputs()[i]).type.shape.size();
          if (!input_strides[i].empty() && input_strides[i].size() != rank) {
            throw py::value_error("flow.compile: input " + std::to_string(i) + " has rank " + std::to_string(rank) +
                                  " but " + std::to_string(input_strides[i].size()) + " strides");
          }
        }
        if (g.outputs().empty()) throw py::value_error("flow.compile: the graph has no outputs");
        if (!frozen_inputs.empty() && frozen_inputs.size() != g.inputs().size()) {
          throw py::value_error("flow.compile: " + std::to_string(g.inputs().size()) + " graph inputs but " +
                                std::to_string(frozen_inputs.size()) + " frozen_inputs flags");
        }
        jit::CompileOptions opt;
        opt.target = parse_target(target);
        opt.cuda_arch = cuda_arch;
        opt.fuse = fuse;
        opt.tuning = std::move(tuning);
        opt.frozen_inputs = frozen_inputs;
        opt.cuda_graphs = cuda_graphs;
        if (conv_search != "heuristic" && conv_search != "exhaustive")
          throw py::value_error("flow.compile: conv_search must be 'heuristic' or 'exhaustive', got '" + conv_search +
                                "'");
        opt.conv_search = conv_search;
        std::shared_ptr<jit::Executable> exe;
        {
          py::gil_scoped_release release;
          exe = jit::compile(g, input_strides, opt);
        }
        return PyExecutable{std::move(exe), input_strides};
      },
      py::arg("graph"), py::arg("input_strides"), py::arg("target") = "cpu", py::arg("cuda_arch") = "sm_90",
      py::arg("fuse") = true, py::arg("tuning") = nullptr, py::arg("frozen_inputs") = std::vector<bool>{},
      py::arg("cuda_graphs") = false, py::arg("conv_search") = "heuristic",
      "Compiles a graph for inputs with the given element strides ([] = contiguous); `tuning` (a "
      "TuningDatabase) replaces heuristic Params by recorded ones; `frozen_inputs` (one bool per graph "
      "input) marks parameters whose derived values are cached between runs; `cuda_graphs` (CUDA "
      "target) replays the whole graph as one CUDA graph from the third run on; `conv_search` picks "
      "cuDNN algorithms by 'heuristic' or 'exhaustive' timing");

  m.def("cache_stats", &cache_stats, "The process-wide kernel cache counters");
  m.def(
      "onednn_stats",
      [] {
        const runtime::onednn::Stats s = runtime::onednn::stats();
        py::dict d;
        d["primitive_hits"] = s.cache_hits;
        d["primitive_misses"] = s.cache_misses;
        d["executions"] = s.executions;
        d["fallback_epilogues"] = s.fallback_epilogues;
        d["weight_reorders"] = s.weight_reorders;
        d["weight_cache_hits"] = s.weight_cache_hits;
        d["weight_cache_bytes"] = s.weight_cache_bytes;
        return d;
      },
      "oneDNN counters: primitive cache, executions, fallback epilogues, weight reorders and reuse");
  // CUDA runtime (dlopen'ed driver: these work, and say no, on machines without a GPU).
  m.def("cuda_is_available", [] { return runtime::cuda::cuda_available(); });
  m.def("cuda_unavailable_reason", [] { return runtime::cuda::unavailable_reason(); });
  m.def("cuda_device_count", [] { return runtime::cuda::device_count(); });
  m.def(
      "cuda_device_name", [](int i) { return runtime::cuda::device_props(i).name; }, py::arg("device") = 0);
  m.def(
      "cuda_device_capability",
      [](int i) {
        const runtime::cuda::DeviceProps& p = runtime::cuda::device_props(i);
        return std::make_pair(p.major, p.minor);
      },
      py::arg("device") = 0);
  m.def("cuda_synchronize", [] {
    py::gil_scoped_release release;
    if (runtime::cuda::cuda_available()) runtime::cuda::synchronize();
  });
  // The caching allocator's counters (flow.cuda.memory_stats and friends). Without CUDA, or before
  // the device's first allocation, everything is zero, as torch reports for an uninitialized device.
  m.def(
      "cuda_memory_stats",
      [](int device) {
        runtime::cuda::AllocatorStats s;
        if (runtime::cuda::cuda_available()) s = runtime::cuda::device_allocator(device).stats();
        py::dict d;
        d["allocated"] = s.allocated;
        d["requested"] = s.requested;
        d["cached"] = s.cached;
        d["reserved"] = s.reserved;
        d["peak"] = s.peak;
        d["device_allocs"] = s.device_allocs;
        d["cache_hits"] = s.cache_hits;
        d["frees"] = s.frees;
        return d;
      },
      py::arg("device"));
  m.def(
      "cuda_reset_peak_memory",
      [](int device) {
        if (runtime::cuda::cuda_available()) runtime::cuda::device_allocator(device).reset_peak();
      },
      py::arg("device"));
  m.def("cuda_empty_cache", [] {
    py::gil_scoped_release release;
    return runtime::cuda::cuda_available() ? runtime::cuda::empty_cache() : size_t{0};
  });
  m.def(
      "cuda_library_counters",
      [] {
        const runtime::cuda::cudnn::Counters c = runtime::cuda::cudnn::counters();
        py::dict d;
        d["cudnn_fused"] = c.fused;
        d["cudnn_unfused"] = c.unfused;
        d["cudnn_fused_refused"] = c.refused;
        d["cudnn_last_refusal"] = c.last_refusal;
        d["cudnn_z_probes"] = c.z_probes;
        d["cudnn_z_read"] = c.z_read;
        d["cublaslt_split_epilogue"] = runtime::cuda::cublaslt::split_epilogue_runs();
        d["cublaslt_plans"] = runtime::cuda::cublaslt::plans_made();
        return d;
      },
      "How the GPU library calls ran: cuDNN fused / unfused convolutions, refusals, probes of whether the fused "
      "call reads z at alpha2 = 0, cuBLASLt split epilogues and plans made");
  m.def("cuda_current_device", [] { return runtime::cuda::cuda_available() ? runtime::cuda::current_device() : 0; });
  py::class_<CudaEvent>(m, "CudaEvent", "A driver event recorded on the calling thread's current stream")
      .def(py::init<>())
      .def("record", &CudaEvent::record, py::call_guard<py::gil_scoped_release>())
      .def("synchronize", &CudaEvent::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("elapsed_time", &CudaEvent::elapsed_time, py::arg("end"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("recorded", &CudaEvent::recorded);
  m.def("default_cuda_arch", &jit::default_cuda_arch);
  m.def("reset_cache_stats", [] { jit::global_kernel_cache().reset_stats(); });
  m.def(
      "clear_memory_cache", [] { jit::global_kernel_cache().clear_memory(); },
      "Forgets the in-memory kernel cache level (the disk is untouched)");
  m.def("cache_dir", [] { return jit::global_kernel_cache().directory(); });
  m.def("launch_count", [] { return jit::launch_counters().kernel_launches; });
  m.def("reset_launch_count", [] { jit::reset_launch_counters(); });
  m.def("op_names", [] { return dsl::all_op_names(); });
  m.def(
      "promote_types",
      [](const std::string& a, const std::string& b) {
        return std::string(dsl::dtype_name(dsl::promote_types(parse_dtype(a), parse_dtype(b))));
      },
      py::arg("a"), py::arg("b"), "torch.promote_types over dtype names (dsl/types.h)");
}

}  // namespace flow::python

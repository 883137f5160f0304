// Note: the autotuning and cache-management side of flow._C: TuningDatabase, Executable.tune,
// target ids, and the kernel-cache directory tools behind `python -m flow.cache`. Tuning releases
// the GIL and re-takes it only to call the progress callback, so Ctrl-C (KeyboardInterrupt raised
// by the callback's signal check) stops a sweep between workloads with every finished record kept.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>

#include "autotune/records.h"
#include "autotune/tuner.h"
#include "bind_common.h"
#include "jit/cache_directory.h"
#include "jit/kernel_cache.h"
#include "jit/library_ops.h"
#include "py_executable.h"
#include "scheduler/workload_key.h"

namespace flow::python {

namespace {

using autotune::TuningDatabase;
using autotune::TuningRecord;

py::dict result_dict(const autotune::KernelTuneResult& r) {
  py::dict d;
  d["kernel"] = r.kernel;
  d["uses"] = r.uses;
  d["name"] = r.name;
  d["workload"] = r.workload;
  d["scheduler"] = r.scheduler;
  d["domain"] = r.domain;
  d["status"] = r.status;
  d["default_params"] = r.default_params;
  d["best_params"] = r.best_params;
  d["default_us"] = r.default_us;
  d["best_us"] = r.best_us;
  d["candidates"] = r.candidates;
  d["failed"] = r.failed;
  d["seconds"] = r.seconds;
  d["strategy"] = r.strategy;
  d["errors"] = r.errors;
  d["record"] = r.status == "tuned" ? py::object(py::str(r.record.to_json().dump())) : py::object(py::none());
  return d;
}

py::dict prune_dict(const jit::PruneResult& r) {
  py::dict d;
  d["removed_files"] = r.removed_files;
  d["removed_bytes"] = r.removed_bytes;
  d["remaining_files"] = r.remaining_files;
  d["remaining_bytes"] = r.remaining_bytes;
  return d;
}

}  // namespace

void bind_autotune(py::module_& m) {
  py::class_<TuningDatabase, std::shared_ptr<TuningDatabase>>(
      m, "TuningDatabase", "Tuning records: the best Params per (workload, target) (autotune/records.h)")
      .def(py::init<>())
      .def_static(
          "load",
          [](const std::string& path) {
            autotune::LoadReport rep;
            auto db = std::make_shared<TuningDatabase>(TuningDatabase::load(path, &rep));
            return py::make_tuple(db, py::dict(py::arg("files") = rep.files, py::arg("lines") = rep.lines,
                                               py::arg("bad_lines") = rep.bad_lines));
          },
          py::arg("path"), "Loads a .jsonl file or every *.jsonl in a directory: (database, report)")
      .def(
          "add_json",
          [](TuningDatabase& db, const std::string& line) {
            try {
              db.add(TuningRecord::from_json(autotune::Json::parse(line)));
            } catch (const autotune::JsonError& e) {
              throw py::value_error(std::string("not a tuning record: ") + e.what());
            }
          },
          py::arg("line"))
      .def("merge", &TuningDatabase::merge, py::arg("other"))
      .def("__len__", &TuningDatabase::size)
      .def("records",
           [](const TuningDatabase& db) {
             std::vector<std::string> out;
             for (const auto& r : db.records()) out.push_back(r.to_json().dump());
             return out;
           },
           "The winning records as JSON lines")
      .def(
          "best",
          [](const TuningDatabase& db, const std::string& workload, const std::string& target) -> py::object {
            const TuningRecord* r = db.best(workload, target);
            return r ? py::object(py::str(r->to_json().dump())) : py::object(py::none());
          },
          py::arg("workload"), py::arg("target"))
      .def("save", &TuningDatabase::save, py::arg("file"), "Writes the winning records (replacing the file)")
      .def_static(
          "append",
          [](const std::string& file, const std::string& line) {
            TuningDatabase::append(file, TuningRecord::from_json(autotune::Json::parse(line)));
          },
          py::arg("file"), py::arg("line"), "Appends one record line to a records file");

  auto exe = py::reinterpret_borrow<py::class_<PyExecutable>>(m.attr("Executable"));
  exe.def_property_readonly("target_id", [](const PyExecutable& e) { return jit::target_id(e.exe->options()); })
      .def("workloads",
           [](const PyExecutable& e) {
             std::vector<std::string> out;
             for (int k = 0; k < e.exe->num_kernels(); ++k)
               out.push_back(sched::workload_key(e.exe->instance(static_cast<size_t>(k)), e.exe->options().target));
             return out;
           },
           "The workload key of each kernel")
      .def("library_calls",
           [](const PyExecutable& e) {
             py::list out;
             for (const auto& st : e.exe->library_steps()) {
               py::dict d;
               d["call"] = st.describe();
               d["workload"] = st.workload;
               d["impl"] = st.impl;
               d["origin"] = st.impl_origin;
               out.append(d);
             }
             return out;
           },
           "Each library call: description, workload key, implementation and where its choice came from")
      .def("kernel_origins",
           [](const PyExecutable& e) {
             std::vector<std::string> out;
             for (int k = 0; k < e.exe->num_kernels(); ++k) out.push_back(e.exe->kernel_origin(static_cast<size_t>(k)));
             return out;
           })
      .def(
          "tune",
          [](PyExecutable& e, const std::vector<jit::Tensor>& inputs, double budget, const std::string& strategy,
             int max_trials, uint64_t seed, int warmup, int repeats, double time_limit,
             std::shared_ptr<TuningDatabase> existing, py::object progress) {
            e.check_inputs(inputs);
            autotune::TuneOptions opt;
            opt.budget_seconds = budget;
            opt.strategy = autotune::parse_strategy(strategy);
            opt.max_trials_per_kernel = max_trials;
            opt.seed = seed;
            opt.measure.warmup = warmup;
            opt.measure.repeats = repeats;
            opt.measure.time_limit_seconds = time_limit;
            autotune::TuneProgress cb;
            if (!progress.is_none()) {
              cb = [&progress](const autotune::KernelTuneResult& r, size_t done, size_t total) {
                py::gil_scoped_acquire gil;
                if (PyErr_CheckSignals() != 0) throw py::error_already_set();
                progress(result_dict(r), done, total);
              };
            }
            std::vector<autotune::KernelTuneResult> results;
            {
              py::gil_scoped_release release;
              results = autotune::tune_executable(*e.exe, inputs, opt, existing.get(), cb);
            }
            py::list out;
            for (const auto& r : results) out.append(result_dict(r));
            return out;
          },
          py::arg("inputs"), py::arg("budget") = 60.0, py::arg("strategy") = "auto", py::arg("max_trials") = 0,
          py::arg("seed") = 0, py::arg("warmup") = 1, py::arg("repeats") = 7, py::arg("time_limit") = 2.0,
          py::arg("existing") = nullptr, py::arg("progress") = py::none(),
          "Tunes the kernels in place on these inputs (autotune/tuner.h); returns one dict per workload");

  m.def(
      "target_id",
      [](const std::string& target, const std::string& cuda_arch) {
        jit::CompileOptions opt;
        if (target == "cpu") opt.target = dsl::Target::CPU;
        else if (target == "cuda") opt.target = dsl::Target::CUDA;
        else throw py::value_error("unknown target '" + target + "' (expected 'cpu' or 'cuda')");
        opt.cuda_arch = cuda_arch;
        return jit::target_id(opt);
      },
      py::arg("target") = "cpu", py::arg("cuda_arch") = "sm_90", "The target id tuning records and bundles use");

  // Kernel-cache layers and directories.
  m.def(
      "cache_add_readonly", [](const std::string& d) { jit::global_kernel_cache().add_readonly_directory(d); },
      py::arg("directory"));
  m.def(
      "cache_remove_readonly", [](const std::string& d) { jit::global_kernel_cache().remove_readonly_directory(d); },
      py::arg("directory"));
  m.def("cache_readonly_dirs", [] { return jit::global_kernel_cache().readonly_directories(); });
  m.def(
      "cache_set_max_bytes", [](uint64_t n) { jit::global_kernel_cache().set_max_bytes(n); }, py::arg("max_bytes"));
  m.def("cache_max_bytes", [] { return jit::global_kernel_cache().max_bytes(); });
  m.def(
      "cache_export",
      [](const std::vector<std::string>& keys, const std::string& dir) {
        int n = 0;
        for (const auto& k : keys) {
          const auto key = jit::parse_cache_key_hex(k);
          if (!key) throw py::value_error("not a cache key: '" + k + "'");
          n += jit::global_kernel_cache().export_entry(*key, dir) ? 1 : 0;
        }
        return n;
      },
      py::arg("keys"), py::arg("directory"), "Writes these entries into another cache directory; returns how many");
  m.def(
      "cache_list",
      [](const std::string& dir) {
        py::list out;
        for (const auto& f : jit::list_cache_files(dir)) {
          py::dict d;
          d["path"] = f.path;
          d["key"] = f.key_hex;
          d["bytes"] = f.bytes;
          d["last_used"] = f.last_used;
          out.append(d);
        }
        return out;
      },
      py::arg("directory"), "Entry files, least recently used first");
  m.def(
      "cache_describe",
      [](const std::string& path) {
        const jit::CacheEntryInfo i = jit::describe_cache_file(path);
        py::dict d;
        d["ok"] = i.ok;
        d["why"] = i.why;
        d["kernel"] = i.kernel;
        d["params"] = i.params_json;
        d["compile_seconds"] = i.compile_seconds;
        d["binary_bytes"] = i.binary_bytes;
        return d;
      },
      py::arg("path"));
  m.def(
      "cache_prune", [](const std::string& dir, uint64_t max_bytes) { return prune_dict(jit::prune_cache_directory(dir, max_bytes)); },
      py::arg("directory"), py::arg("max_bytes"));
  m.def(
      "cache_clear", [](const std::string& dir) { return prune_dict(jit::clear_cache_directory(dir)); },
      py::arg("directory"));
  m.def(
      "parse_byte_size",
      [](const std::string& s) {
        try {
          return jit::parse_byte_size(s);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("text"));
}

}  // namespace flow::python

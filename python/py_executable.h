// Note: flow._C.Executable: a jit::Executable with the input strides it was compiled for. Shared
// by the binding files (bind_jit.cpp defines the class, bind_autotune.cpp adds tuning).
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bind_common.h"
#include "jit/compile.h"
#include "jit/tensor.h"

namespace flow::python {

// The graph inputs of a jitted call that stay the same from call to call (a module's weights: hundreds
// of them) with the argument slots empty, checked once when made. A call fills in its arguments,
// checks only those, and runs: no Python list of every input is converted, and no weight is checked,
// copied or touched from Python (after a model's kernels ran, every such object is a cache miss).
struct PyInputTemplate {
  const jit::Executable* owner = nullptr;  // the executable whose inputs these are (checked for it)
  std::vector<jit::Tensor> inputs;         // argument slots hold empty tensors between calls
  std::vector<size_t> arg_slots;
  std::mutex busy;  // held by the call running on `inputs`; a concurrent call runs on a copy
};

// An Executable with the input strides it was compiled for.
struct PyExecutable {
  std::shared_ptr<jit::Executable> exe;
  std::vector<std::vector<int64_t>> input_strides;

  // Raises ValueError unless `t` can be graph input i (jit::Executable::input_mismatch).
  void check_input(size_t i, const jit::Tensor& t) const {
    if (std::string why = exe->input_mismatch(i, t); !why.empty())
      throw py::value_error("Executable.run: input " + std::to_string(i) + " " + why);
  }

  // Raises ValueError unless `inputs` match the graph's inputs and the compiled strides.
  void check_inputs(const std::vector<jit::Tensor>& inputs) const {
    const size_t n = exe->graph().inputs().size();
    if (inputs.size() != n) {
      throw py::value_error("Executable.run: expected " + std::to_string(n) + " inputs, got " +
                            std::to_string(inputs.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) check_input(i, inputs[i]);
  }

  std::vector<jit::Tensor> run(const std::vector<jit::Tensor>& inputs) const {
    check_inputs(inputs);
    py::gil_scoped_release release;
    return exe->run_checked(inputs);
  }

  // A template of `inputs` (all checked) with the slots `arg_slots` emptied.
  std::unique_ptr<PyInputTemplate> make_template(std::vector<jit::Tensor> inputs,
                                                 const std::vector<size_t>& arg_slots) const {
    check_inputs(inputs);
    auto tmpl = std::make_unique<PyInputTemplate>();
    for (size_t slot : arg_slots) {
      if (slot >= inputs.size()) throw py::value_error("Executable.template: argument slot out of range");
      inputs[slot] = jit::Tensor();
    }
    tmpl->owner = exe.get();
    tmpl->inputs = std::move(inputs);
    tmpl->arg_slots = arg_slots;
    return tmpl;
  }

  // Runs on `tmpl`'s inputs with `args` (flow._C tensors, in the order of its argument slots).
  std::vector<jit::Tensor> run_template(PyInputTemplate& tmpl, const py::list& args) const {
    if (tmpl.owner != exe.get())  // its inputs were checked against another graph
      throw py::value_error("Executable.run_template: the template was made by another executable");
    if (args.size() != tmpl.arg_slots.size()) {
      throw py::value_error("Executable.run_template: expected " + std::to_string(tmpl.arg_slots.size()) +
                            " arguments, got " + std::to_string(args.size()));
    }
    // The slots are written and emptied with the GIL held, and a concurrent caller copies the
    // inputs with the GIL held: a copy never sees a slot half written.
    std::unique_lock<std::mutex> lock(tmpl.busy, std::try_to_lock);
    std::vector<jit::Tensor> copy;
    if (!lock.owns_lock()) copy = tmpl.inputs;
    std::vector<jit::Tensor>& inputs = lock.owns_lock() ? tmpl.inputs : copy;
    // Empties the argument slots again on the way out (with the GIL held: declared before the
    // release), so that the template keeps no argument alive.
    struct EmptySlots {
      std::vector<jit::Tensor>& inputs;
      const std::vector<size_t>& slots;
      ~EmptySlots() {
        for (size_t s : slots) inputs[s] = jit::Tensor();
      }
    } empty_slots{inputs, tmpl.arg_slots};
    for (size_t k = 0; k < args.size(); ++k) {
      const size_t slot = tmpl.arg_slots[k];
      if (!py::isinstance<jit::Tensor>(args[k])) {
        throw py::type_error("Executable.run_template: argument " + std::to_string(k) + " is not a flow._C.Tensor");
      }
      inputs[slot] = args[k].cast<const jit::Tensor&>();
      check_input(slot, inputs[slot]);
    }
    py::gil_scoped_release release;
    return exe->run_checked(inputs);
  }
};

}  // namespace flow::python

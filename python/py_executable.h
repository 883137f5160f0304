// Note: flow._C.Executable: a jit::Executable with the input strides it was compiled for. Shared
// by the binding files (bind_jit.cpp defines the class, bind_autotune.cpp adds tuning).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "bind_common.h"
#include "jit/compile.h"
#include "jit/tensor.h"

namespace flow::python {

// Whether `t` addresses its elements exactly as a tensor with strides `expected` would (dims of
// size 1 may have any stride; a tensor with no elements matches anything of its shape).
inline bool same_layout(const jit::Tensor& t, const std::vector<int64_t>& expected) {
  if (t.numel() == 0) return true;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] != 1 && t.strides[d] != expected[d]) return false;
  }
  return true;
}

// An Executable with the input strides it was compiled for.
struct PyExecutable {
  std::shared_ptr<jit::Executable> exe;
  std::vector<std::vector<int64_t>> input_strides;

  // Raises ValueError unless `inputs` match the graph's inputs and the compiled strides.
  void check_inputs(const std::vector<jit::Tensor>& inputs) const {
    const dsl::Graph& g = exe->graph();
    if (inputs.size() != g.inputs().size()) {
      throw py::value_error("Executable.run: expected " + std::to_string(g.inputs().size()) + " inputs, got " +
                            std::to_string(inputs.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const jit::Tensor& t = inputs[i];
      const dsl::TensorType& want = g.value(g.inputs()[i]).type;
      if (!t.storage) throw py::value_error("Executable.run: input " + std::to_string(i) + " has no storage");
      if (t.sizes != want.shape || t.dtype != want.dtype) {
        throw py::value_error("Executable.run: input " + std::to_string(i) + " is " + dsl::dtype_name(t.dtype) +
                              dsl::shape_str(t.sizes) + " but the graph was compiled for " + want.str());
      }
      const std::vector<int64_t> expected =
          input_strides[i].empty() ? jit::contiguous_strides_of(t.sizes) : input_strides[i];
      if (expected.size() != t.strides.size() || !same_layout(t, expected)) {
        throw py::value_error("Executable.run: input " + std::to_string(i) + " has strides " +
                              dsl::shape_str(t.strides) + " but the graph was compiled for strides " +
                              dsl::shape_str(expected));
      }
    }
  }

  std::vector<jit::Tensor> run(const std::vector<jit::Tensor>& inputs) const {
    check_inputs(inputs);
    py::gil_scoped_release release;
    return exe->run(inputs);
  }
};

}  // namespace flow::python

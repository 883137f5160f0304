// Note: helpers shared by the binding files of flow._C: dtype names, Python -> Attrs conversion and
// the registration functions each file provides. Dtypes cross the boundary as flow's own names
// ("float32", "bfloat16", ...); the Python package maps them to its dtype objects.
#pragma once
#include <pybind11/pybind11.h>

#include <string>

#include "dsl/graph.h"
#include "dsl/types.h"

namespace flow::python {

namespace py = pybind11;

// "float32" -> DType; raises TypeError naming the bad name.
dsl::DType parse_dtype(const std::string& name);
// A dict of Python values -> Attrs: bool, int, float, str, and lists/tuples of ints. None values
// are dropped (an absent attribute). Anything else raises TypeError naming the key.
dsl::Attrs attrs_from_dict(const py::dict& d);

void bind_tensor(py::module_& m);
void bind_graph(py::module_& m);
void bind_jit(py::module_& m);
void bind_autotune(py::module_& m);  // after bind_jit (extends Executable)

}  // namespace flow::python

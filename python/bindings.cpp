// Note: the module definition of flow._C. It owns the translation of C++ exceptions to Python ones
// (dsl::OpError by kind, so shape errors are RuntimeError and dtype errors TypeError, as in torch;
// any other std::exception is a RuntimeError with its message, never a crash) and the small helpers
// every binding file shares. The bindings themselves live in bind_tensor.cpp (runtime tensors),
// bind_graph.cpp (dsl::Graph) and bind_jit.cpp (eager ops, compile, Executable, cache counters).
#include <pybind11/stl.h>

#include <exception>
#include <stdexcept>

#include "bind_common.h"

namespace flow::python {

dsl::DType parse_dtype(const std::string& name) {
  try {
    return dsl::dtype_from_name(name);
  } catch (const std::invalid_argument&) {
    throw py::type_error("flow: unknown dtype '" + name + "'");
  }
}

namespace {

// An int-like Python object (int, numpy integer; not bool) as int64.
bool is_int_like(const py::handle& h) {
  return !py::isinstance<py::bool_>(h) && (py::isinstance<py::int_>(h) || PyIndex_Check(h.ptr()));
}

int64_t to_int64(const py::handle& h, const std::string& key) {
  const py::int_ v = py::reinterpret_steal<py::int_>(PyNumber_Index(h.ptr()));
  if (!v) throw py::error_already_set();
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow != 0) throw py::value_error("attribute '" + key + "': integer out of the int64 range");
  return static_cast<int64_t>(x);
}

}  // namespace

dsl::Attrs attrs_from_dict(const py::dict& d) {
  dsl::Attrs out;
  for (const auto& item : d) {
    if (!py::isinstance<py::str>(item.first)) throw py::type_error("attribute names must be str");
    const std::string key = py::cast<std::string>(item.first);
    const py::handle v = item.second;
    if (v.is_none()) continue;
    if (py::isinstance<py::bool_>(v)) {
      out[key] = py::cast<bool>(v);
    } else if (is_int_like(v)) {
      out[key] = to_int64(v, key);
    } else if (py::isinstance<py::float_>(v)) {
      out[key] = py::cast<double>(v);
    } else if (py::isinstance<py::str>(v)) {
      out[key] = py::cast<std::string>(v);
    } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      std::vector<int64_t> ints;
      for (const auto& e : py::reinterpret_borrow<py::sequence>(v)) {
        if (!is_int_like(e)) {
          throw py::type_error("attribute '" + key + "' must be a list of ints, got an element of type " +
                               std::string(py::str(py::type::of(e).attr("__name__"))));
        }
        ints.push_back(to_int64(e, key));
      }
      out[key] = ints;
    } else {
      throw py::type_error("attribute '" + key + "' has unsupported type " +
                           std::string(py::str(py::type::of(v).attr("__name__"))));
    }
  }
  return out;
}

}  // namespace flow::python

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  m.doc() = "flow's C++ core: runtime tensors, the tensor-level graph, eager ops and the JIT compiler";

  // Registered translators are tried newest first; this one only claims dsl::OpError and lets the
  // rest fall through to pybind11's (std::exception -> RuntimeError, std::bad_alloc -> MemoryError,
  // std::out_of_range -> IndexError, ...).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const flow::dsl::OpError& e) {
      switch (e.kind) {
        case flow::dsl::OpError::Kind::Type:
          PyErr_SetString(PyExc_TypeError, e.what());
          return;
        case flow::dsl::OpError::Kind::Index:
          PyErr_SetString(PyExc_IndexError, e.what());
          return;
        case flow::dsl::OpError::Kind::NotImplemented:
          PyErr_SetString(PyExc_NotImplementedError, e.what());
          return;
        case flow::dsl::OpError::Kind::Value:
          break;
      }
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  flow::python::bind_tensor(m);
  flow::python::bind_graph(m);
  flow::python::bind_jit(m);
  flow::python::bind_autotune(m);
}

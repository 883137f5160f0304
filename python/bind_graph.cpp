// Note: _C.Graph wraps dsl::Graph for the tracer: values are plain int ids, dtypes are names and
// attrs are dicts (see attrs_from_dict). Type inference and every shape/dtype check happen in
// Graph::add_op, so a traced op fails with the same torch-like message as the eager op would.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bind_common.h"

namespace flow::python {

namespace {

const dsl::Value& checked_value(const dsl::Graph& g, int id) {
  if (id < 0 || id >= static_cast<int>(g.values().size())) {
    throw py::index_error("flow.Graph: no value with id " + std::to_string(id));
  }
  return g.value(id);
}

}  // namespace

void bind_graph(py::module_& m) {
  py::class_<dsl::Graph>(m, "Graph", "The tensor-level graph (flow::dsl::Graph)")
      .def(py::init<>())
      .def(
          "add_input",
          [](dsl::Graph& g, const std::vector<int64_t>& shape, const std::string& dtype, const std::string& name) {
            return g.add_input(dsl::TensorType{shape, parse_dtype(dtype)}, name);
          },
          py::arg("shape"), py::arg("dtype"), py::arg("name") = "")
      .def(
          "add_constant",
          [](dsl::Graph& g, double value, const std::string& dtype, bool wrapped_number) {
            return g.add_constant(value, parse_dtype(dtype), wrapped_number);
          },
          py::arg("value"), py::arg("dtype"), py::arg("wrapped_number") = false)
      .def(
          "add_op",
          [](dsl::Graph& g, const std::string& op, const std::vector<int>& inputs, const py::dict& attrs) {
            for (int id : inputs) checked_value(g, id);
            return g.add_op(op, inputs, attrs_from_dict(attrs));
          },
          py::arg("op"), py::arg("inputs"), py::arg("attrs") = py::dict())
      .def(
          "set_autocast",
          [](dsl::Graph& g, const std::optional<std::string>& dtype, const std::string& device) {
            if (!dtype) return g.set_autocast(std::nullopt);
            dsl::AutocastPolicy p;
            p.dtype = dsl::dtype_from_name(*dtype);
            if (!dsl::is_half(p.dtype))
              throw py::value_error("autocast: dtype must be 'float16' or 'bfloat16', got '" + *dtype + "'");
            try {
              p.device = dsl::autocast_device_from_name(device);
            } catch (const std::invalid_argument& e) {
              throw py::value_error(e.what());
            }
            g.set_autocast(p);
          },
          py::arg("dtype"), py::arg("device") = "cuda")
      .def_property_readonly(
          "autocast",
          [](const dsl::Graph& g) -> std::optional<std::pair<std::string, std::string>> {
            if (!g.autocast()) return std::nullopt;
            return std::make_pair(std::string(dsl::dtype_name(g.autocast()->dtype)),
                                  std::string(g.autocast()->device == dsl::AutocastDevice::CUDA ? "cuda" : "cpu"));
          },
          "(dtype, device) of the autocast policy ops are added under, or None")
      .def(
          "mark_output",
          [](dsl::Graph& g, int id) {
            checked_value(g, id);
            g.mark_output(id);
          },
          py::arg("value"))
      .def(
          "value_shape", [](const dsl::Graph& g, int id) { return checked_value(g, id).type.shape; }, py::arg("value"))
      .def(
          "value_dtype",
          [](const dsl::Graph& g, int id) { return std::string(dsl::dtype_name(checked_value(g, id).type.dtype)); },
          py::arg("value"))
      .def_property_readonly("inputs", [](const dsl::Graph& g) { return g.inputs(); })
      .def_property_readonly("outputs", [](const dsl::Graph& g) { return g.outputs(); })
      .def_property_readonly("num_values", [](const dsl::Graph& g) { return g.values().size(); })
      .def_property_readonly("num_nodes", [](const dsl::Graph& g) { return g.nodes().size(); })
      .def("node_ops",
           [](const dsl::Graph& g) {
             std::vector<std::string> ops;
             for (const dsl::Node& n : g.nodes()) ops.push_back(n.op);
             return ops;
           })
      .def("to_string", &dsl::Graph::to_string)
      .def("__str__", &dsl::Graph::to_string)
      .def("hash_hex", [](const dsl::Graph& g) { return g.hash().hex(); })
      .def("copy", [](const dsl::Graph& g) { return dsl::Graph(g); })
      .def(
          "to_bytes",
          [](const dsl::Graph& g) {
            std::string b;
            g.serialize(b);
            return py::bytes(b);
          },
          "The canonical serialization (input names are not kept)")
      .def_static(
          "from_bytes",
          [](const py::bytes& b) {
            try {
              return dsl::Graph::deserialize(std::string(b));
            } catch (const std::runtime_error& e) {
              throw py::value_error(e.what());
            }
          },
          py::arg("data"));
  m.def(
      "autocast_class",
      [](const std::string& op, const std::string& device) {
        try {
          return std::string(dsl::autocast_class_name(dsl::autocast_class(op, dsl::autocast_device_from_name(device))));
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("op"), py::arg("device"),
      "torch.autocast's class of `op` on a device type: 'lower_precision_fp', 'fp32' or 'none' (dsl/autocast.h)");
}

}  // namespace flow::python

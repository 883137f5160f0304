// Note: _C.Tensor wraps jit::Tensor (a strided view over shared storage). Conversions to and from
// numpy always copy, so a numpy array never aliases flow storage behind the user's back; the one
// exception is the private numpy_view(), a writable view the Python package uses for in-place
// fills. bfloat16 has no numpy dtype: it travels as uint16 bit patterns (from_numpy(a, "bfloat16"),
// numpy_raw()), and numpy() refuses it with torch's message, as torch's .numpy() does.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <sstream>

#include "bind_common.h"
#include "jit/eager.h"
#include "jit/tensor.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"

namespace flow::python {

namespace {

using dsl::DType;
using jit::Tensor;

py::dtype numpy_dtype_of(DType t) {
  switch (t) {
    case DType::Bool:
      return py::dtype("?");
    case DType::Int32:
      return py::dtype("int32");
    case DType::Int64:
      return py::dtype("int64");
    case DType::Float16:
      return py::dtype("float16");
    case DType::BFloat16:
      return py::dtype("uint16");  // bit patterns
    case DType::Float32:
      return py::dtype("float32");
    case DType::Float64:
      return py::dtype("float64");
    case DType::UInt8:
      return py::dtype("uint8");
    case DType::Int8:
      return py::dtype("int8");
    case DType::Int16:
      return py::dtype("int16");
  }
  throw std::logic_error("numpy_dtype_of: bad dtype");
}

// The flow dtype of a numpy array; `requested` may only pick bfloat16 for 16-bit integer arrays.
DType dtype_of_array(const py::array& a, const std::optional<std::string>& requested) {
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  const ssize_t size = dt.itemsize();
  if (dt.byteorder() == '>') throw py::type_error("flow.from_numpy: big-endian arrays are not supported");
  if (requested && *requested == "bfloat16") {
    if ((kind == 'u' || kind == 'i') && size == 2) return DType::BFloat16;
    throw py::type_error("flow.from_numpy: bfloat16 data must be given as a uint16 or int16 array of bit patterns");
  }
  std::optional<DType> natural;
  if (kind == 'b' && size == 1) natural = DType::Bool;
  if (kind == 'i' && size == 4) natural = DType::Int32;
  if (kind == 'i' && size == 8) natural = DType::Int64;
  if (kind == 'u' && size == 1) natural = DType::UInt8;
  if (kind == 'i' && size == 1) natural = DType::Int8;
  if (kind == 'i' && size == 2) natural = DType::Int16;
  if (kind == 'f' && size == 2) natural = DType::Float16;
  if (kind == 'f' && size == 4) natural = DType::Float32;
  if (kind == 'f' && size == 8) natural = DType::Float64;
  if (!natural) {
    throw py::type_error("can't convert np.ndarray of type numpy." + std::string(py::str(dt)) +
                         ". The only supported types are: float64, float32, float16, int64, int32, int16, int8, "
                         "uint8, and bool (and bfloat16 given as uint16 bit patterns).");
  }
  if (requested && parse_dtype(*requested) != *natural) {
    throw py::type_error("flow.from_numpy: array of numpy dtype " + std::string(py::str(dt)) + " does not hold dtype " +
                         *requested);
  }
  return *natural;
}

Tensor from_numpy(const py::array& arr, const std::optional<std::string>& dtype) {
  const DType t = dtype_of_array(arr, dtype);
  const py::array c = py::array::ensure(arr, py::array::c_style);
  if (!c) throw py::error_already_set();
  dsl::Shape sizes(c.shape(), c.shape() + c.ndim());
  Tensor out = Tensor::empty(sizes, t);
  const size_t bytes = static_cast<size_t>(out.numel()) * static_cast<size_t>(dsl::dtype_size(t));
  if (bytes > 0) std::memcpy(out.data(), c.data(), bytes);
  return out;
}

void check_has_storage(const Tensor& t) {
  if (!t.storage) throw std::runtime_error("flow: tensor has no storage");
}

// A numpy array viewing `t`'s elements (shares memory; keeps the storage alive).
py::array numpy_view(const Tensor& t) {
  check_has_storage(t);
  if (t.device() != runtime::DeviceType::CPU)
    throw py::type_error(
        "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.");
  const ssize_t item = dsl::dtype_size(t.dtype);
  std::vector<ssize_t> shape(t.sizes.begin(), t.sizes.end());
  std::vector<ssize_t> strides;
  strides.reserve(t.strides.size());
  for (int64_t s : t.strides) strides.push_back(static_cast<ssize_t>(s) * item);
  auto* keep = new std::shared_ptr<runtime::Buffer>(t.storage);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<runtime::Buffer>*>(p); });
  return py::array(numpy_dtype_of(t.dtype), shape, strides, t.data(), owner);
}

py::array to_numpy(const Tensor& t) {
  if (t.dtype == DType::BFloat16) throw py::type_error("Got unsupported ScalarType BFloat16");
  return numpy_view(t).attr("copy")();
}

int64_t storage_elements(const Tensor& t) {
  check_has_storage(t);
  return static_cast<int64_t>(t.storage->size()) / dsl::dtype_size(t.dtype);
}

// A view of t's storage; `dtype` (when given) reads the storage as another type, with sizes,
// strides and offset counted in its elements (torch's Tensor.view(dtype) builds these).
Tensor as_strided(const Tensor& source, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                  int64_t offset, const std::optional<std::string>& dtype) {
  Tensor t = source;
  if (dtype) t.dtype = parse_dtype(*dtype);
  if (sizes.size() != strides.size()) {
    throw std::runtime_error("mismatch in length of strides and shape");
  }
  if (offset < 0) throw std::runtime_error("Tensor: invalid storage offset " + std::to_string(offset));
  int64_t last = offset;  // the last element the view reaches
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0)
      throw std::runtime_error("Trying to create tensor with negative dimension " + std::to_string(sizes[i]));
    if (strides[i] < 0)
      throw std::runtime_error("as_strided: Negative strides are not supported at the moment, got strides: " +
                               dsl::shape_str(strides));
    if (sizes[i] == 0) empty = true;
    last += (sizes[i] - 1) * strides[i];
  }
  const int64_t avail = storage_elements(t);
  if (!empty && last >= avail) {
    std::ostringstream os;
    os << "setStorage: sizes " << dsl::shape_str(sizes) << ", strides " << dsl::shape_str(strides)
       << ", storage offset " << offset << ", and itemsize " << dsl::dtype_size(t.dtype)
       << " requiring a storage size of " << (last + 1) * dsl::dtype_size(t.dtype)
       << " are out of bounds for storage of size " << avail * dsl::dtype_size(t.dtype);
    throw std::runtime_error(os.str());
  }
  Tensor v = t;
  v.sizes = sizes;
  v.strides = strides;
  v.offset = offset;
  return v;
}

std::string tensor_repr(const Tensor& t) {
  std::ostringstream os;
  os << "_C.Tensor(" << dsl::dtype_name(t.dtype) << dsl::shape_str(t.sizes) << ", strides=" << dsl::shape_str(t.strides)
     << ", offset=" << t.offset << ")";
  return os.str();
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor", "A strided view over shared CPU storage (flow::jit::Tensor)")
      .def_static(
          "empty",
          [](const std::vector<int64_t>& sizes, const std::string& dtype) {
            for (int64_t s : sizes) {
              if (s < 0)
                throw std::runtime_error("Trying to create tensor with negative dimension " + std::to_string(s));
            }
            return Tensor::empty(sizes, parse_dtype(dtype));
          },
          py::arg("sizes"), py::arg("dtype") = "float32", "A new contiguous tensor with uninitialized contents")
      .def_static("from_numpy", &from_numpy, py::arg("array"), py::arg("dtype") = py::none(),
                  "Copies a numpy array into fresh aligned storage (bfloat16: a uint16 array of bit patterns)")
      .def("numpy", &to_numpy, "A copy as a numpy array (bfloat16 raises TypeError, as torch)")
      .def(
          "numpy_raw", [](const Tensor& t) { return numpy_view(t).attr("copy")(); },
          "A copy as a numpy array; bfloat16 as uint16 bit patterns")
      .def("numpy_view", &numpy_view, "A writable numpy view sharing this tensor's storage (bfloat16: uint16)")
      .def(
          "jit_key",
          [](const Tensor& t) {
            // flow.jit's guard for a tensor argument (python/flow/_jit.py, _leaf_key): ("T", sizes,
            // dtype, layout, device), the layout being the strides with those of size-1 dims as -1
            // (their stride never changes which elements are read). One call per argument.
            py::tuple sizes(t.sizes.size()), layout(t.sizes.size());
            for (size_t i = 0; i < t.sizes.size(); ++i) {
              sizes[i] = py::int_(t.sizes[i]);
              layout[i] = py::int_(t.sizes[i] == 1 ? int64_t{-1} : t.strides[i]);
            }
            return py::make_tuple("T", sizes, dsl::dtype_name(t.dtype), layout, runtime::device_type_name(t.device()));
          },
          "flow.jit's guard key of a tensor argument: (\"T\", sizes, dtype, layout, device)")
      .def_property_readonly("shape", [](const Tensor& t) { return t.sizes; })
      .def_property_readonly("strides", [](const Tensor& t) { return t.strides; })
      .def_property_readonly("offset", [](const Tensor& t) { return t.offset; })
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(dsl::dtype_name(t.dtype)); })
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("itemsize", [](const Tensor& t) { return dsl::dtype_size(t.dtype); })
      .def_property_readonly("storage_elements", &storage_elements)
      .def("numel", &Tensor::numel)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("data_ptr",
           [](const Tensor& t) {
             check_has_storage(t);
             return reinterpret_cast<uintptr_t>(t.data());
           })
      .def("storage_ptr",
           [](const Tensor& t) {
             check_has_storage(t);
             return reinterpret_cast<uintptr_t>(t.storage->data());
           })
      .def_property_readonly(
          "_version",
          [](const Tensor& t) {
            check_has_storage(t);
            return t.storage->version();
          },
          "How many in-place writes the storage has seen (torch's Tensor._version)")
      .def_property_readonly(
          "_storage_refs", [](const Tensor& t) { return t.storage ? t.storage.use_count() : 0L; },
          "How many flow._C tensors (views and copies held inside flow included) share this storage: for "
          "tests of what keeps memory alive")
      .def(
          "bump_version",
          [](const Tensor& t) {
            check_has_storage(t);
            t.storage->bump_version();
          },
          "Marks the storage as written in place (caches of values derived from it recompute)")
      .def("as_strided", &as_strided, py::arg("sizes"), py::arg("strides"), py::arg("offset") = 0,
           py::arg("dtype") = py::none(),
           "A view of the same storage (element strides and offset), read as `dtype` when given (counted in its "
           "elements)")
      .def(
          "contiguous",
          [](const Tensor& t, const std::optional<std::string>& dtype) {
            check_has_storage(t);
            const DType to = dtype ? parse_dtype(*dtype) : t.dtype;
            py::gil_scoped_release release;
            return jit::eager_contiguous(t, to);
          },
          py::arg("dtype") = py::none(), "A new contiguous copy (optionally converted to `dtype`)")
      .def_property_readonly("device",
                             [](const Tensor& t) { return std::string(runtime::device_type_name(t.device())); })
      .def(
          "to_device",
          [](const Tensor& t, const std::string& device, bool keep_layout) {
            check_has_storage(t);
            const auto dev = device == "cuda" ? runtime::DeviceType::CUDA : runtime::DeviceType::CPU;
            if (device != "cuda" && device != "cpu") throw py::value_error("unknown device '" + device + "'");
            if (dev == runtime::DeviceType::CUDA && !runtime::cuda::cuda_available())
              throw std::runtime_error("flow: no CUDA device is available (" + runtime::cuda::unavailable_reason() +
                                       ")");
            py::gil_scoped_release release;
            return keep_layout ? jit::to_device_keeping_layout(t, dev) : jit::to_device(t, dev);
          },
          py::arg("device"), py::arg("keep_layout") = false,
          "A contiguous copy on `device` ('cpu' or 'cuda'); itself when already there. keep_layout: a dense "
          "tensor keeps its strides (torch's preserve_format)")
      .def_property_readonly("is_dense", &jit::is_dense,
                             "Whether the elements fill one gap-free run of storage (in some dim order)")
      .def(
          "write_dense",
          [](const Tensor& dst, const Tensor& src) {
            check_has_storage(dst);
            check_has_storage(src);
            py::gil_scoped_release release;
            jit::write_dense(dst, src);
          },
          py::arg("src"), "Writes src (same shape and dtype, any device) into this dense tensor in place")
      .def("__repr__", &tensor_repr);
}

}  // namespace flow::python

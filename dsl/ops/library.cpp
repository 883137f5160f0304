// Note: the library ops (pattern OutEWiseFusable): matmul, linear, conv2d, conv_transpose2d, conv3d,
// conv_transpose3d. They
// have no compute definition: the CPU executor calls oneDNN (jit/library_ops.h), the reference
// interpreter runs naive loops (dsl/library_reference.h), and the fuser lets elementwise epilogues
// join them as post-ops (scheduler/library_patterns.h). Entries here give torch's shape and dtype
// rules and its error messages (all RuntimeError in torch, so OpError::Kind::Value, dtype mismatches
// included), and canonical attrs:
//   conv2d:           stride [2], padding [2] (top, left), dilation [2], groups; "padding_end" [2]
//                     (bottom, right) only when it differs from padding (padding="same" with an even
//                     kernel extent). padding may be given as an int, a pair, "valid" or "same".
//                     "channels_last" 1 (set by the layout pass, scheduler/channels_last.h, never by
//                     users): the output is [N, OH, OW, C], the NHWC order of torch's result.
//   conv_transpose2d: stride [2], padding [2], output_padding [2], dilation [2], groups; and
//                     "channels_last" as conv2d's (the layout pass sets it on CUDA only).
//   conv3d, conv_transpose3d: their 2-d namesakes' attrs with three entries (depth, height, width),
//                     never channels_last. oneDNN runs them on the CPU; on CUDA flow.nn.functional
//                     writes 3-d convolutions over the 2-d ones (python/flow/nn/_functional_3d.py)
//                     until cuDNN's N-d path has run on a device.
// Floating dtypes are supported: float64 runs by reference loops on the CPU (oneDNN has no f64
// matmul/conv); float16/bfloat16 run on the CPU as float32 products of the half inputs rounded
// once to the output dtype (jit/library_ops.cpp), and on CUDA through cuDNN/cuBLASLt with float32
// accumulation. Integer dtypes raise NotImplemented, which torch would run but flow does not yet.
#include <string>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

// c10's scalar type names as torch's matmul/conv messages print them ("float != double").
const char* c10_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "long int";
    case DType::Float16:
      return "c10::Half";
    case DType::BFloat16:
      return "c10::BFloat16";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    case DType::UInt8:
      return "unsigned char";
    case DType::Int8:
      return "signed char";
    case DType::Int16:
      return "short int";
  }
  return "?";
}

[[noreturn]] void value_error(const std::string& msg) {
  throw OpError(OpError::Kind::Value, msg);
}

void check_supported_dtype(const std::string& op, DType t) {
  if (!is_floating(t)) {
    throw OpError(OpError::Kind::NotImplemented, "\"" + op + "\" not implemented for '" + torch_dtype_name(t) +
                                                     "' in flow (library ops take floating-point tensors)");
  }
}

std::string dims_x(const Shape& s) {  // "2x3"
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

std::string torch_size(const Shape& s) {
  return shape_str(s);
}  // "[2, 3]"

// ---- matmul -----------------------------------------------------------------------------------

std::vector<TensorType> matmul_infer(const Graph& g, const std::vector<int>& in) {
  const TensorType a = g.value(in[0]).type, b = g.value(in[1]).type;
  const size_t ra = a.shape.size(), rb = b.shape.size();
  if (ra == 0 || rb == 0) {
    value_error("both arguments to matmul need to be at least 1D, but they are " + std::to_string(ra) + "D and " +
                std::to_string(rb) + "D");
  }
  Shape out;
  if (ra == 1 && rb == 1) {
    if (a.shape[0] != b.shape[0]) {
      value_error("inconsistent tensor size, expected tensor [" + std::to_string(a.shape[0]) + "] and src [" +
                  std::to_string(b.shape[0]) + "] to have the same number of elements, but got " +
                  std::to_string(a.shape[0]) + " and " + std::to_string(b.shape[0]) + " elements respectively");
    }
  } else if (ra == 2 && rb == 1) {
    if (a.shape[1] != b.shape[0]) {
      value_error("size mismatch, got input (" + std::to_string(a.shape[0]) + "), mat (" + dims_x(a.shape) +
                  "), vec (" + std::to_string(b.shape[0]) + ")");
    }
    out = {a.shape[0]};
  } else if (ra <= 2 && rb == 2) {
    const Shape a2 = ra == 1 ? Shape{1, a.shape[0]} : a.shape;
    if (a2[1] != b.shape[0]) {
      value_error("mat1 and mat2 shapes cannot be multiplied (" + dims_x(a2) + " and " + dims_x(b.shape) + ")");
    }
    out = ra == 1 ? Shape{b.shape[1]} : Shape{a.shape[0], b.shape[1]};
  } else {
    // Batched: a 1-D operand becomes a row (a) or column (b) matrix whose dim is dropped at the end.
    const Shape a2 = ra == 1 ? Shape{1, a.shape[0]} : a.shape;
    const Shape b2 = rb == 1 ? Shape{b.shape[0], 1} : b.shape;
    const Shape ba(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
    const Shape batch = broadcast_shapes(ba, bb);
    const int64_t m = a2[a2.size() - 2], k = a2.back(), k2 = b2[b2.size() - 2], n = b2.back();
    if (k != k2) {
      if (rb <= 2 || ra == 1) {  // torch folds the batch of a into the rows of one mm
        const int64_t rows = numel(batch) * m;
        value_error("mat1 and mat2 shapes cannot be multiplied (" + std::to_string(rows) + "x" + std::to_string(k) +
                    " and " + std::to_string(k2) + "x" + std::to_string(n) + ")");
      }
      const std::string nb = std::to_string(numel(batch));
      value_error("Expected size for first two dimensions of batch2 tensor to be: [" + nb + ", " + std::to_string(k) +
                  "] but got: [" + nb + ", " + std::to_string(k2) + "].");
    }
    out = batch;
    if (ra > 1) out.push_back(m);
    if (rb > 1) out.push_back(n);
  }
  if (a.dtype != b.dtype) {
    value_error(std::string("expected m1 and m2 to have the same dtype, but got: ") + c10_name(a.dtype) +
                " != " + c10_name(b.dtype));
  }
  check_supported_dtype("matmul", a.dtype);
  return {TensorType{out, a.dtype}};
}

// ---- linear -----------------------------------------------------------------------------------

std::vector<TensorType> linear_infer(const Graph& g, const std::vector<int>& in) {
  if (in.size() != 2 && in.size() != 3) {
    throw OpError(OpError::Kind::Type,
                  "linear() takes 2 or 3 input(s) but " + std::to_string(in.size()) + " were given");
  }
  const TensorType x = g.value(in[0]).type, w = g.value(in[1]).type;
  if (x.shape.empty() || w.shape.empty() || w.shape.size() > 2) {
    value_error("linear(): expected input of at least 1 dim and a 1-D or 2-D weight, but got input of size: " +
                torch_size(x.shape) + " and weight of size: " + torch_size(w.shape));
  }
  const int64_t in_features = x.shape.back();
  const int64_t w_in = w.shape.back();
  Shape out(x.shape.begin(), x.shape.end() - 1);
  if (w.shape.size() == 2) out.push_back(w.shape[0]);
  if (in_features != w_in) {
    const int64_t rows = numel(Shape(x.shape.begin(), x.shape.end() - 1));
    const std::string wt =
        w.shape.size() == 2 ? std::to_string(w_in) + "x" + std::to_string(w.shape[0]) : std::to_string(w_in) + "x1";
    value_error("mat1 and mat2 shapes cannot be multiplied (" + std::to_string(rows) + "x" +
                std::to_string(in_features) + " and " + wt + ")");
  }
  if (x.dtype != w.dtype) {
    value_error(std::string("expected m1 and m2 to have the same dtype, but got: ") + c10_name(x.dtype) +
                " != " + c10_name(w.dtype));
  }
  if (in.size() == 3) {
    const TensorType b = g.value(in[2]).type;
    bool ok = b.shape.size() <= out.size();
    for (size_t i = 0; ok && i < b.shape.size(); ++i) {
      const int64_t db = b.shape[b.shape.size() - 1 - i], dout = out[out.size() - 1 - i];
      if (db != dout && db != 1) {
        value_error("The expanded size of the tensor (" + std::to_string(dout) + ") must match the existing size (" +
                    std::to_string(db) + ") at non-singleton dimension " + std::to_string(out.size() - 1 - i) +
                    ".  Target sizes: " + torch_size(out) + ".  Tensor sizes: " + torch_size(b.shape));
      }
    }
    if (!ok) {
      value_error("linear(): bias of size " + torch_size(b.shape) + " does not broadcast to the output size " +
                  torch_size(out));
    }
    if (b.dtype != x.dtype) {
      value_error(std::string("expected m1 and m2 to have the same dtype, but got: ") + c10_name(b.dtype) +
                  " != " + c10_name(x.dtype));
    }
  }
  check_supported_dtype("linear", x.dtype);
  return {TensorType{out, x.dtype}};
}

// ---- conv2d / conv3d / conv_transpose2d / conv_transpose3d ------------------------------------
// One definition for both spatial ranks (nsp = 2 or 3); the 3-d ops are registered for the CPU's
// oneDNN (scheduler/library_patterns.cpp), and their attrs are conv2d's with three entries each.

// An int or a list of 1 or nsp ints as nsp ints; `key` for torch's message.
std::vector<int64_t> spatial_attr(const Attrs& a, const std::string& key, const std::string& op, int64_t dflt,
                                  size_t nsp) {
  const AttrValue* v = attr_find(a, key);
  if (!v) return std::vector<int64_t>(nsp, dflt);
  if (const int64_t* i = std::get_if<int64_t>(v)) return std::vector<int64_t>(nsp, *i);
  if (const auto* xs = std::get_if<std::vector<int64_t>>(v)) {
    if (xs->size() == 1) return std::vector<int64_t>(nsp, (*xs)[0]);
    if (xs->size() == nsp) return *xs;
    value_error("expected " + key + " to be a single integer value or a list of " + std::to_string(nsp) +
                " values to match the convolution dimensions, but got " + key + "=" + shape_str(*xs));
  }
  throw OpError(OpError::Kind::Type, op + "(): attribute '" + key + "' must be an int or a list of ints");
}

// "a x b [x c]", as torch's size messages join spatial extents.
std::string by(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " x " : "") + std::to_string(v[i]);
  return s;
}

Attrs conv_canonicalize(const std::string& op, bool transposed, size_t nsp, const Graph& g, const std::vector<int>& in,
                        const Attrs& a) {
  if (transposed) {
    check_attrs(op, a, {"stride", "padding", "output_padding", "dilation", "groups", "channels_last"});
  } else {
    check_attrs(op, a, {"stride", "padding", "padding_end", "dilation", "groups", "channels_last"});
  }
  if (in.size() != 2 && in.size() != 3) {
    throw OpError(OpError::Kind::Type,
                  op + "() takes 2 or 3 input(s) but " + std::to_string(in.size()) + " were given");
  }
  const std::vector<int64_t> stride = spatial_attr(a, "stride", op, 1, nsp);
  const std::vector<int64_t> dilation = spatial_attr(a, "dilation", op, 1, nsp);
  const int64_t groups = attr_find(a, "groups") ? attr_int(a, "groups", op) : 1;
  for (int64_t s : stride)
    if (s <= 0) value_error("non-positive stride is not supported");
  for (int64_t d : dilation)
    if (d <= 0) value_error("non-positive dilation is not supported");
  if (groups <= 0) value_error("non-positive groups is not supported");
  std::vector<int64_t> pad, pad_end;
  const AttrValue* pv = attr_find(a, "padding");
  if (pv && std::holds_alternative<std::string>(*pv)) {
    const std::string mode = std::get<std::string>(*pv);
    if (transposed || (mode != "same" && mode != "valid")) value_error("Invalid padding string: '" + mode + "'");
    pad.assign(nsp, 0);
    pad_end.assign(nsp, 0);
    if (mode == "same") {
      for (int64_t s : stride)
        if (s != 1) value_error("padding='same' is not supported for strided convolutions");
      const Shape& w = g.value(in[1]).type.shape;
      if (w.size() != nsp + 2) {
        value_error("weight should have " + std::to_string(nsp + 2) + " dimensions for " + op +
                    ", but got weight of size " + torch_size(w));
      }
      for (size_t d = 0; d < nsp; ++d) {  // torch: the low side gets total / 2
        const int64_t total = dilation[d] * (w[2 + d] - 1);
        pad[d] = total / 2;
        pad_end[d] = total - pad[d];
      }
    }
  } else {
    pad = spatial_attr(a, "padding", op, 0, nsp);
    pad_end = attr_find(a, "padding_end") ? spatial_attr(a, "padding_end", op, 0, nsp) : pad;
  }
  for (int64_t p : pad)
    if (p < 0) value_error("negative padding is not supported");
  for (int64_t p : pad_end)
    if (p < 0) value_error("negative padding is not supported");
  Attrs out;
  out["stride"] = stride;
  out["padding"] = pad;
  out["dilation"] = dilation;
  out["groups"] = groups;
  if (!transposed && pad_end != pad) out["padding_end"] = pad_end;
  if (attr_find(a, "channels_last") && attr_int(a, "channels_last", op) != 0) {
    if (nsp != 2 || g.value(in[0]).type.shape.size() != 4) value_error(op + ": channels_last needs a 4-D input");
    out["channels_last"] = int64_t{1};
  }
  if (transposed) {
    const std::vector<int64_t> op_pad = spatial_attr(a, "output_padding", op, 0, nsp);
    for (size_t d = 0; d < nsp; ++d) {
      if (op_pad[d] < 0) value_error("negative output_padding is not supported");
      if (op_pad[d] >= stride[d] && op_pad[d] >= dilation[d]) {
        static const char* const kAxes[3] = {"depth", "height", "width"};
        std::string msg = "output padding must be smaller than either stride or dilation, but got";
        for (const auto& [what, v] : {std::pair<const char*, const std::vector<int64_t>*>{"output_padding", &op_pad},
                                      {"stride", &stride},
                                      {"dilation", &dilation}}) {
          for (size_t i = 0; i < nsp; ++i)
            msg += std::string(" ") + what + "_" + kAxes[3 - nsp + i] + ": " + std::to_string((*v)[i]);
        }
        value_error(msg);
      }
    }
    out["output_padding"] = op_pad;
  }
  return out;
}

std::vector<TensorType> conv_infer(const std::string& op, bool transposed, size_t nsp, const Graph& g,
                                   const std::vector<int>& in, const Attrs& a) {
  const TensorType x = g.value(in[0]).type, w = g.value(in[1]).type;
  if (x.shape.size() != nsp + 1 && x.shape.size() != nsp + 2) {
    value_error("Expected " + std::to_string(nsp + 1) + "D (unbatched) or " + std::to_string(nsp + 2) +
                "D (batched) input to " + op + ", but got input of size: " + torch_size(x.shape));
  }
  if (w.shape.size() != nsp + 2) {
    value_error("weight should have " + std::to_string(nsp + 2) + " dimensions for " + op +
                ", but got weight of size " + torch_size(w.shape));
  }
  const bool batched = x.shape.size() == nsp + 2;
  Shape xs = x.shape;
  if (!batched) xs.insert(xs.begin(), 1);
  const std::vector<int64_t> stride = attr_ints(a, "stride", op), pad = attr_ints(a, "padding", op),
                             dil = attr_ints(a, "dilation", op);
  const std::vector<int64_t> pad_end = attr_find(a, "padding_end") ? attr_ints(a, "padding_end", op) : pad;
  const int64_t groups = attr_int(a, "groups", op);
  int64_t out_channels = 0;
  if (!transposed) {
    if (w.shape[0] % groups != 0) {
      value_error("Given groups=" + std::to_string(groups) + ", expected weight to be divisible by " +
                  std::to_string(groups) + " at dimension 0, but got weight of size [" + torch_size(w.shape) +
                  "] instead");
    }
    if (xs[1] != w.shape[1] * groups) {
      value_error("Given groups=" + std::to_string(groups) + ", weight of size " + torch_size(w.shape) +
                  ", expected input" + torch_size(x.shape) + " to have " + std::to_string(w.shape[1] * groups) +
                  " channels, but got " + std::to_string(xs[1]) + " channels instead");
    }
    out_channels = w.shape[0];
  } else {
    if (xs[1] != w.shape[0]) {
      value_error("Given transposed=1, weight of size " + torch_size(w.shape) + ", expected input" +
                  torch_size(x.shape) + " to have " + std::to_string(w.shape[0]) + " channels, but got " +
                  std::to_string(xs[1]) + " channels instead");
    }
    if (w.shape[0] % groups != 0) {
      value_error("Given groups=" + std::to_string(groups) + ", expected weight to be divisible by " +
                  std::to_string(groups) + " at dimension 0, but got weight of size [" + torch_size(w.shape) +
                  "] instead");
    }
    out_channels = w.shape[1] * groups;
  }
  if (in.size() == 3) {
    const TensorType b = g.value(in[2]).type;
    if (b.shape.size() != 1 || b.shape[0] != out_channels) {
      value_error("Given weight of size " + torch_size(w.shape) + ", expected bias to be 1-dimensional with " +
                  std::to_string(out_channels) + " elements, but got bias of size " + torch_size(b.shape) + " instead");
    }
    if (b.dtype != x.dtype) {
      value_error(std::string("Input type (") + c10_name(x.dtype) + ") and bias type (" + c10_name(b.dtype) +
                  ") should be the same");
    }
  }
  if (x.dtype != w.dtype) {
    value_error(std::string("Input type (") + c10_name(x.dtype) + ") and weight type (" + c10_name(w.dtype) +
                ") should be the same");
  }
  Shape out{xs[0], out_channels};
  const std::vector<int64_t> in_size(xs.begin() + 2, xs.end());
  if (!transposed) {
    std::vector<int64_t> padded(nsp), reach(nsp);
    bool fits = true;
    for (size_t d = 0; d < nsp; ++d) {
      padded[d] = in_size[d] + pad[d] + pad_end[d];
      reach[d] = dil[d] * (w.shape[2 + d] - 1) + 1;
      fits = fits && padded[d] >= reach[d];
    }
    if (!fits) {
      value_error("Calculated padded input size per channel: (" + by(padded) + "). Kernel size: (" + by(reach) +
                  "). Kernel size can't be greater than actual input size");
    }
    for (size_t d = 0; d < nsp; ++d) out.push_back((padded[d] - reach[d]) / stride[d] + 1);
  } else {
    const std::vector<int64_t> op_pad = attr_ints(a, "output_padding", op);
    bool positive = true;
    for (size_t d = 0; d < nsp; ++d) {
      out.push_back((in_size[d] - 1) * stride[d] - 2 * pad[d] + dil[d] * (w.shape[2 + d] - 1) + op_pad[d] + 1);
      positive = positive && out.back() > 0;
    }
    if (!positive) {
      value_error("Given input size per channel: (" + by(in_size) + "). Calculated output size per channel: (" +
                  by(std::vector<int64_t>(out.begin() + 2, out.end())) + "). Output size is too small");
    }
  }
  check_supported_dtype(op, x.dtype);
  if (attr_find(a, "channels_last")) out = {out[0], out[2], out[3], out[1]};
  if (!batched) out.erase(out.begin());
  return {TensorType{out, x.dtype}};
}

void add_conv(const std::string& name, bool transposed, size_t nsp) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::OutEWiseFusable;
  d.num_inputs = -1;
  d.canonicalize = [name, transposed, nsp](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    return conv_canonicalize(name, transposed, nsp, g, in, a);
  };
  d.infer = [name, transposed, nsp](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    return conv_infer(name, transposed, nsp, g, in, a);
  };
  register_builtin(std::move(d));
}

}  // namespace

size_t conv_spatial_rank(const std::string& op) {
  if (op == "conv2d" || op == "conv_transpose2d") return 2;
  if (op == "conv3d" || op == "conv_transpose3d") return 3;
  return 0;
}

bool is_transposed_conv(const std::string& op) {
  return op == "conv_transpose2d" || op == "conv_transpose3d";
}

void register_library_ops() {
  OpDef mm;
  mm.name = "matmul";
  mm.pattern = OpPattern::OutEWiseFusable;
  mm.num_inputs = 2;
  mm.canonicalize = [](const Graph&, const std::vector<int>&, const Attrs& a) {
    check_attrs("matmul", a, {});
    return a;
  };
  mm.infer = [](const Graph& g, const std::vector<int>& in, const Attrs&) { return matmul_infer(g, in); };
  register_builtin(std::move(mm));

  OpDef lin;
  lin.name = "linear";
  lin.pattern = OpPattern::OutEWiseFusable;
  lin.num_inputs = -1;
  lin.canonicalize = [](const Graph&, const std::vector<int>&, const Attrs& a) {
    check_attrs("linear", a, {});
    return a;
  };
  lin.infer = [](const Graph& g, const std::vector<int>& in, const Attrs&) { return linear_infer(g, in); };
  register_builtin(std::move(lin));

  add_conv("conv2d", false, 2);
  add_conv("conv_transpose2d", true, 2);
  add_conv("conv3d", false, 3);
  add_conv("conv_transpose3d", true, 3);
}

}  // namespace flow::dsl

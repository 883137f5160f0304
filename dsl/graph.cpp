// Note: the tensor-level graph. The arena is append-only: ids are indices into values_/nodes_ and
// never change, so passes build a new graph rather than editing one in place.
//
// add_op runs the op table entry: a Composite op calls its decompose (which adds primitive ops
// through add_op again); any other op first canonicalizes its attrs (OpDef::canonicalize: defaults,
// dtype aliases, normalized "dims"), then infers its output types from the canonical attrs, and
// the node stores the canonical attrs. So `sum(x, dims=[-1])` and `sum(x, dims=[1])` on a 2-d x
// build identical nodes and hash equal.
//
// serialize() is the canonical byte form behind hash(): fixed-width little-endian integers,
// floating constants by their IEEE-754 bits, attrs in key order with their variant index, and no
// input names (renaming an argument does not change the graph's identity).
#include "dsl/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "dsl/expr.h"
#include "dsl/op_table.h"

namespace flow::dsl {

namespace {

constexpr char kGraphMagic[] = "flow.graph";
constexpr uint32_t kGraphFormat = 1;

void put_u8(std::string& out, uint8_t v) {
  out.push_back(static_cast<char>(v));
}
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_i64(std::string& out, int64_t v) {
  put_u64(out, static_cast<uint64_t>(v));
}
void put_f64(std::string& out, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_u64(out, bits);
}
void put_str(std::string& out, const std::string& s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out += s;
}
void put_ids(std::string& out, const std::vector<int>& ids) {
  put_u32(out, static_cast<uint32_t>(ids.size()));
  for (int id : ids) put_i64(out, id);
}
void put_type(std::string& out, const TensorType& t) {
  put_u8(out, static_cast<uint8_t>(t.dtype));
  put_u32(out, static_cast<uint32_t>(t.shape.size()));
  for (int64_t d : t.shape) put_i64(out, d);
}

// The shortest decimal form that reads back to the same value ("2.5", "0.1", "inf", "nan"); as a
// float when `as_float` (a float32 constant 0.1f prints "0.1", not "0.10000000149011612").
std::string format_double(double v, bool as_float = false) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (as_float ? std::strtof(buf, nullptr) == static_cast<float>(v) : std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  // Keep floats visibly floats: "2" -> "2.0".
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string attr_str_value(const AttrValue& v) {
  switch (v.index()) {
    case 0:
      return std::to_string(std::get<int64_t>(v));
    case 1:
      return format_double(std::get<double>(v));
    case 2:
      return std::get<bool>(v) ? "true" : "false";
    case 3:
      return "\"" + std::get<std::string>(v) + "\"";
    default: {
      std::string s = "[";
      const auto& xs = std::get<std::vector<int64_t>>(v);
      for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + std::to_string(xs[i]);
      return s + "]";
    }
  }
}

std::string constant_str(const Value& v) {
  if (v.type.dtype == DType::Bool) return v.scalar != 0 ? "true" : "false";
  if (is_integer(v.type.dtype)) return std::to_string(static_cast<int64_t>(v.scalar));
  return format_double(v.scalar, v.type.dtype != DType::Float64);
}

// A constant's value as the dtype stores it, so equal constants compare and hash equal.
double round_constant(double value, DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return value != 0 ? 1.0 : 0.0;
    case DType::Int32:
    case DType::Int64: {
      if (!std::isfinite(value)) throw std::invalid_argument("add_constant: non-finite value for an integer dtype");
      return std::trunc(value);
    }
    case DType::Float32:
    case DType::Float16:
    case DType::BFloat16:
      return static_cast<double>(static_cast<float>(value));
    case DType::Float64:
      return value;
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16: {  // wrapped, as torch converts a Python scalar to a uint8 operand's type
      if (!std::isfinite(value)) throw std::invalid_argument("add_constant: non-finite value for an integer dtype");
      // (reduced modulo 2^32 first, which keeps its residue modulo 2^16, so that it fits int64)
      return static_cast<double>(wrap_integer(dtype, static_cast<int64_t>(std::fmod(std::trunc(value), 0x1p32))));
    }
  }
  return value;
}

const char* attr_type_name(size_t index) {
  static const char* const kNames[] = {"an int", "a float", "a bool", "a string", "a list of ints"};
  return index < 5 ? kNames[index] : "?";
}

[[noreturn]] void attr_missing(const std::string& key, const std::string& op) {
  throw OpError(OpError::Kind::Type, op + "(): missing required attribute '" + key + "'");
}
[[noreturn]] void attr_mistyped(const AttrValue& v, const std::string& key, const std::string& op, size_t want) {
  throw OpError(OpError::Kind::Type, op + "(): attribute '" + key + "' must be " + attr_type_name(want) + ", got " +
                                         attr_type_name(v.index()) + " (" + attr_str_value(v) + ")");
}

}  // namespace

std::string TensorType::str() const {
  return std::string(dtype_name(dtype)) + shape_str(shape);
}

// ---- building -----------------------------------------------------------------------------------

int Graph::append_value(const TensorType& t, ValueKind kind, int producer) {
  for (int64_t d : t.shape) {
    if (d < 0) throw std::invalid_argument("Graph: negative dimension in shape " + shape_str(t.shape));
  }
  Value v;
  v.id = static_cast<int>(values_.size());
  v.type = t;
  v.kind = kind;
  v.producer = producer;
  values_.push_back(std::move(v));
  return values_.back().id;
}

int Graph::add_input(const TensorType& t, const std::string& name) {
  const int id = append_value(t, ValueKind::Input, -1);
  values_[id].name = name;
  inputs_.push_back(id);
  return id;
}

int Graph::add_constant(double value, DType dtype, bool wrapped_number) {
  const int id = append_value(TensorType{{}, dtype}, ValueKind::Constant, -1);
  values_[id].scalar = round_constant(value, dtype);
  values_[id].wrapped_number = wrapped_number;
  return id;
}

int Graph::append_node(const std::string& op, const std::vector<int>& inputs, const std::vector<TensorType>& outs,
                       const Attrs& attrs) {
  for (int in : inputs) {
    if (in < 0 || in >= static_cast<int>(values_.size())) {
      throw std::out_of_range("Graph::append_node(" + op + "): no value %" + std::to_string(in));
    }
  }
  Node n;
  n.id = static_cast<int>(nodes_.size());
  n.op = op;
  n.inputs = inputs;
  n.attrs = attrs;
  for (const TensorType& t : outs) n.outputs.push_back(append_value(t, ValueKind::OpResult, n.id));
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

std::vector<int> Graph::add_op(const std::string& op, const std::vector<int>& given, const Attrs& attrs) {
  const OpDef& def = lookup_op(op);
  struct Depth {  // restores the nesting count on every exit, exceptions included
    int& d;
    explicit Depth(int& x) : d(++x) {}
    ~Depth() { --d; }
  } depth(add_depth_);
  const bool outermost = add_depth_ == 1;
  if (def.num_inputs >= 0 && static_cast<int>(given.size()) != def.num_inputs) {
    throw OpError(OpError::Kind::Type, op + "() takes " + std::to_string(def.num_inputs) + " input(s) but " +
                                           std::to_string(given.size()) + " were given");
  }
  for (int in : given) {
    if (in < 0 || in >= static_cast<int>(values_.size())) {
      throw OpError(OpError::Kind::Value, op + "(): input %" + std::to_string(in) + " is not a value of this graph");
    }
  }
  if (!(autocast_ && outermost)) return add_op_body(def, op, given, attrs);
  // Under autocast, an op that fails (a shape error the caller catches) leaves no casts behind.
  const size_t nodes = nodes_.size(), values = values_.size();
  try {
    return add_op_body(def, op, autocast_inputs(*this, op, given, *autocast_), attrs);
  } catch (...) {
    nodes_.resize(nodes);
    values_.resize(values);
    for (auto it = autocast_casts_.begin(); it != autocast_casts_.end();)
      it = it->second >= static_cast<int>(values) ? autocast_casts_.erase(it) : std::next(it);
    throw;
  }
}

std::vector<int> Graph::add_op_body(const OpDef& def, const std::string& op, const std::vector<int>& inputs,
                                    const Attrs& attrs) {
  if (def.pattern == OpPattern::Composite) {
    if (!def.decompose) throw std::logic_error("op table: composite op '" + op + "' has no decompose");
    return def.decompose(*this, inputs, attrs);
  }
  const Attrs canonical = def.canonicalize ? def.canonicalize(*this, inputs, attrs) : attrs;
  if (!def.infer) throw std::logic_error("op table: op '" + op + "' has no infer");
  const std::vector<TensorType> outs = def.infer(*this, inputs, canonical);
  return nodes_[append_node(op, inputs, outs, canonical)].outputs;
}

int Graph::autocast_cast(int value, DType dtype) {
  const auto key = std::make_pair(value, dtype);
  if (auto it = autocast_casts_.find(key); it != autocast_casts_.end()) return it->second;
  const int c = add("cast", {value}, {{"dtype", std::string(dtype_name(dtype))}});
  autocast_casts_.emplace(key, c);
  return c;
}

int Graph::add(const std::string& op, const std::vector<int>& inputs, const Attrs& attrs) {
  const std::vector<int> outs = add_op(op, inputs, attrs);
  if (outs.size() != 1) {
    throw std::logic_error("Graph::add(" + op + "): op has " + std::to_string(outs.size()) + " outputs, not 1");
  }
  return outs[0];
}

void Graph::mark_output(int value) {
  if (value < 0 || value >= static_cast<int>(values_.size())) {
    throw std::out_of_range("Graph::mark_output: no value %" + std::to_string(value));
  }
  outputs_.push_back(value);
}

std::vector<int> Graph::consumers(int value) const {
  std::vector<int> out;
  for (const Node& n : nodes_) {
    for (int in : n.inputs) {
      if (in == value) {
        out.push_back(n.id);
        break;
      }
    }
  }
  return out;
}

// ---- printing, serialization, hashing ---------------------------------------------------------

std::string Graph::to_string() const {
  std::string s;
  for (const Value& v : values_) {
    if (v.kind == ValueKind::Input) {
      s += "%" + std::to_string(v.id) + ": " + v.type.str() + " = input";
      if (!v.name.empty()) s += " \"" + v.name + "\"";
      s += "\n";
    } else if (v.kind == ValueKind::Constant) {
      s += "%" + std::to_string(v.id) + ": " + v.type.str() + " = constant " + constant_str(v);
      if (v.wrapped_number) s += " (wrapped number)";
      s += "\n";
    }
  }
  for (const Node& n : nodes_) {
    std::string lhs;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value& o = values_[n.outputs[i]];
      lhs += (i ? ", %" : "%") + std::to_string(o.id) + ": " + o.type.str();
    }
    s += (n.outputs.size() == 1 ? lhs : "(" + lhs + ")") + " = " + n.op + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? ", %" : "%") + std::to_string(n.inputs[i]);
    s += ")";
    if (!n.attrs.empty()) {
      s += " {";
      bool first = true;
      for (const auto& [key, val] : n.attrs) {
        s += (first ? "" : ", ") + key + "=" + attr_str_value(val);
        first = false;
      }
      s += "}";
    }
    s += "\n";
  }
  s += "return (";
  for (size_t i = 0; i < outputs_.size(); ++i) s += (i ? ", %" : "%") + std::to_string(outputs_[i]);
  return s + ")\n";
}

void Graph::serialize(std::string& out) const {
  put_str(out, kGraphMagic);
  put_u32(out, kGraphFormat);
  put_u32(out, static_cast<uint32_t>(values_.size()));
  for (const Value& v : values_) {
    put_u8(out, static_cast<uint8_t>(v.kind));
    put_type(out, v.type);
    put_i64(out, v.producer);
    if (v.kind == ValueKind::Constant) {
      put_f64(out, v.scalar);
      put_u8(out, v.wrapped_number ? 1 : 0);
    }
  }
  put_u32(out, static_cast<uint32_t>(nodes_.size()));
  for (const Node& n : nodes_) {
    put_str(out, n.op);
    put_ids(out, n.inputs);
    put_ids(out, n.outputs);
    put_u32(out, static_cast<uint32_t>(n.attrs.size()));
    for (const auto& [key, val] : n.attrs) {
      put_str(out, key);
      put_u8(out, static_cast<uint8_t>(val.index()));
      switch (val.index()) {
        case 0:
          put_i64(out, std::get<int64_t>(val));
          break;
        case 1:
          put_f64(out, std::get<double>(val));
          break;
        case 2:
          put_u8(out, std::get<bool>(val) ? 1 : 0);
          break;
        case 3:
          put_str(out, std::get<std::string>(val));
          break;
        default: {
          const auto& xs = std::get<std::vector<int64_t>>(val);
          put_u32(out, static_cast<uint32_t>(xs.size()));
          for (int64_t x : xs) put_i64(out, x);
        }
      }
    }
  }
  put_ids(out, inputs_);
  put_ids(out, outputs_);
}

namespace {

class GraphReader {
 public:
  explicit GraphReader(const std::string& b) : b_(b) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("Graph::deserialize: " + what + " at byte " + std::to_string(pos_));
  }
  const char* take(size_t n) {
    if (n > b_.size() - pos_) fail("unexpected end of data");
    const char* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint64_t u(int bytes) {
    const char* p = take(static_cast<size_t>(bytes));
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
    return v;
  }
  uint8_t u8() { return static_cast<uint8_t>(u(1)); }
  uint32_t u32() { return static_cast<uint32_t>(u(4)); }
  int64_t i64() { return static_cast<int64_t>(u(8)); }
  double f64() {
    const uint64_t bits = u(8);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  std::string str() {
    const uint32_t n = u32();
    return std::string(take(n), n);
  }
  // A count of items each at least `min_bytes` long (guards allocations against absurd counts).
  uint32_t count(size_t min_bytes) {
    const uint32_t n = u32();
    if (static_cast<uint64_t>(n) * min_bytes > b_.size() - pos_) fail("count larger than the data");
    return n;
  }
  std::vector<int> ids(size_t limit) {
    std::vector<int> out(count(8));
    for (int& id : out) {
      const int64_t v = i64();
      if (v < 0 || static_cast<uint64_t>(v) >= limit) fail("value id out of range");
      id = static_cast<int>(v);
    }
    return out;
  }
  TensorType type() {
    TensorType t;
    const uint8_t d = u8();
    if (d > static_cast<uint8_t>(DType::Float64)) fail("bad dtype");
    t.dtype = static_cast<DType>(d);
    t.shape.resize(count(8));
    for (int64_t& x : t.shape) {
      x = i64();
      if (x < 0) fail("negative size");
    }
    return t;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  const std::string& b_;
  size_t pos_ = 0;
};

}  // namespace

Graph Graph::deserialize(const std::string& bytes) {
  GraphReader r(bytes);
  if (r.str() != kGraphMagic) r.fail("not a flow graph");
  if (const uint32_t f = r.u32(); f != kGraphFormat)
    r.fail("graph format " + std::to_string(f) + " (this build reads " + std::to_string(kGraphFormat) + ")");
  Graph g;
  const uint32_t nv = r.count(1 + 1 + 4 + 8);
  g.values_.resize(nv);
  for (uint32_t i = 0; i < nv; ++i) {
    Value& v = g.values_[i];
    v.id = static_cast<int>(i);
    const uint8_t kind = r.u8();
    if (kind > static_cast<uint8_t>(ValueKind::OpResult)) r.fail("bad value kind");
    v.kind = static_cast<ValueKind>(kind);
    v.type = r.type();
    v.producer = static_cast<int>(r.i64());
    if (v.kind == ValueKind::Constant) {
      v.scalar = r.f64();
      v.wrapped_number = r.u8() != 0;
    }
  }
  const uint32_t nn = r.count(4 + 4 + 4 + 4);
  g.nodes_.resize(nn);
  for (uint32_t i = 0; i < nn; ++i) {
    Node& n = g.nodes_[i];
    n.id = static_cast<int>(i);
    n.op = r.str();
    n.inputs = r.ids(nv);
    n.outputs = r.ids(nv);
    const uint32_t na = r.count(4 + 1);
    for (uint32_t a = 0; a < na; ++a) {
      std::string key = r.str();
      switch (r.u8()) {
        case 0:
          n.attrs[key] = r.i64();
          break;
        case 1:
          n.attrs[key] = r.f64();
          break;
        case 2:
          n.attrs[key] = r.u8() != 0;
          break;
        case 3:
          n.attrs[key] = r.str();
          break;
        case 4: {
          std::vector<int64_t> xs(r.count(8));
          for (int64_t& x : xs) x = r.i64();
          n.attrs[key] = std::move(xs);
          break;
        }
        default:
          r.fail("bad attribute type");
      }
    }
  }
  g.inputs_ = r.ids(nv);
  g.outputs_ = r.ids(nv);
  if (!r.done()) r.fail("trailing bytes");
  // Consistency: producers name the node that lists the value as an output, and nodes read only
  // values defined before them (the node order is a schedule).
  std::vector<bool> defined(nv, false);
  for (const Value& v : g.values_) {
    if (v.kind == ValueKind::OpResult) {
      if (v.producer < 0 || static_cast<uint32_t>(v.producer) >= nn) r.fail("bad producer");
      const auto& outs = g.nodes_[static_cast<size_t>(v.producer)].outputs;
      if (std::find(outs.begin(), outs.end(), v.id) == outs.end()) r.fail("producer does not list its output");
    } else {
      defined[static_cast<size_t>(v.id)] = true;
    }
  }
  for (const Node& n : g.nodes_) {
    for (int in : n.inputs)
      if (!defined[static_cast<size_t>(in)]) r.fail("node " + std::to_string(n.id) + " reads an undefined value");
    for (int out : n.outputs) defined[static_cast<size_t>(out)] = true;
  }
  for (int in : g.inputs_)
    if (g.values_[static_cast<size_t>(in)].kind != ValueKind::Input) r.fail("graph input is not an input value");
  // Types: every node's stored output types must be what its op infers from its inputs and attrs
  // (bytes from a file are not trusted: a wrong shape would make kernels index out of bounds), and
  // each output must be an op result produced by that node.
  for (const Node& n : g.nodes_) {
    const OpDef* def = find_op(n.op);
    if (!def) r.fail("unknown op '" + n.op + "'");
    for (int out : n.outputs) {
      const Value& v = g.values_[static_cast<size_t>(out)];
      if (v.kind != ValueKind::OpResult || v.producer != n.id)
        r.fail("node " + std::to_string(n.id) + " lists a value it does not produce");
    }
    if (!def->infer) continue;
    std::vector<TensorType> inferred;
    try {
      inferred = def->infer(g, n.inputs, n.attrs);
    } catch (const std::exception& e) {
      r.fail("node " + std::to_string(n.id) + " (" + n.op + "): " + e.what());
    }
    if (inferred.size() != n.outputs.size())
      r.fail("node " + std::to_string(n.id) + " (" + n.op + ") has the wrong number of outputs");
    for (size_t k = 0; k < inferred.size(); ++k)
      if (!(g.values_[static_cast<size_t>(n.outputs[k])].type == inferred[k]))
        r.fail("node " + std::to_string(n.id) + " (" + n.op + "): stored type " +
               g.values_[static_cast<size_t>(n.outputs[k])].type.str() + " is not the inferred " + inferred[k].str());
  }
  return g;
}

Hash128 Graph::hash() const {
  std::string bytes;
  serialize(bytes);
  return xxh3_128(bytes);
}

// ---- attribute accessors ----------------------------------------------------------------------

const AttrValue* attr_find(const Attrs& a, const std::string& key) {
  const auto it = a.find(key);
  return it == a.end() ? nullptr : &it->second;
}

void throw_index_out_of_bounds(int64_t index, int64_t size, int64_t dim, OpError::Kind kind) {
  throw OpError(kind, "index " + std::to_string(index) + " is out of bounds for dimension " + std::to_string(dim) +
                          " with size " + std::to_string(size));
}

void throw_check_index_report(int64_t index, int64_t size, int64_t tagged_dim) {
  const bool runtime_error = (tagged_dim & kCheckIndexRuntimeError) != 0;
  throw_index_out_of_bounds(index, size, tagged_dim & ~kCheckIndexRuntimeError,
                            runtime_error ? OpError::Kind::Value : OpError::Kind::Index);
}

int64_t attr_int(const Attrs& a, const std::string& key, const std::string& op) {
  const AttrValue* v = attr_find(a, key);
  if (!v) attr_missing(key, op);
  if (const int64_t* i = std::get_if<int64_t>(v)) return *i;
  attr_mistyped(*v, key, op, 0);
}

// An int attr is accepted where a float is expected (Python passes alpha=2 as an int).
double attr_float(const Attrs& a, const std::string& key, const std::string& op) {
  const AttrValue* v = attr_find(a, key);
  if (!v) attr_missing(key, op);
  if (const double* d = std::get_if<double>(v)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  attr_mistyped(*v, key, op, 1);
}

bool attr_bool(const Attrs& a, const std::string& key, const std::string& op) {
  const AttrValue* v = attr_find(a, key);
  if (!v) attr_missing(key, op);
  if (const bool* b = std::get_if<bool>(v)) return *b;
  attr_mistyped(*v, key, op, 2);
}

std::string attr_str(const Attrs& a, const std::string& key, const std::string& op) {
  const AttrValue* v = attr_find(a, key);
  if (!v) attr_missing(key, op);
  if (const std::string* s = std::get_if<std::string>(v)) return *s;
  attr_mistyped(*v, key, op, 3);
}

// A single int is accepted as a one-element list (torch: dim=1 or dim=(1,)).
std::vector<int64_t> attr_ints(const Attrs& a, const std::string& key, const std::string& op) {
  const AttrValue* v = attr_find(a, key);
  if (!v) attr_missing(key, op);
  if (const auto* xs = std::get_if<std::vector<int64_t>>(v)) return *xs;
  if (const int64_t* i = std::get_if<int64_t>(v)) return {*i};
  attr_mistyped(*v, key, op, 4);
}

}  // namespace flow::dsl

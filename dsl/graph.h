// Note: the tensor-level graph. One generic op record {op, inputs, outputs, attrs} in a per-graph
// arena with integer ids (nvFuser's generic Expr is the model), so cloning, printing, hashing and
// serializing are written once. Values carry a static shape and a dtype; layout (strides) is not
// part of a value: kernels receive the strides of their actual arguments at run time.
//
// Nodes are appended in topological order (an op's inputs always exist before it), so the node
// vector is a valid schedule order.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "dsl/autocast.h"
#include "dsl/serialize.h"
#include "dsl/types.h"

namespace flow::dsl {

struct OpDef;

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;
using Attrs = std::map<std::string, AttrValue>;  // ordered: canonical for hashing

struct TensorType {
  Shape shape;
  DType dtype = DType::Float32;
  bool operator==(const TensorType& o) const { return shape == o.shape && dtype == o.dtype; }
  std::string str() const;  // "float32[2, 3]"
};

enum class ValueKind : uint8_t { Input, Constant, OpResult };

struct Value {
  int id = -1;
  TensorType type;
  ValueKind kind = ValueKind::OpResult;
  int producer = -1;  // node id for OpResult
  std::string name;   // inputs: the user's argument name; optional otherwise
  // Constants: a 0-dim tensor holding `scalar`. `wrapped_number` marks a Python scalar
  // (x * 2.0): it takes part in type promotion only by category, as in torch.
  double scalar = 0;
  bool wrapped_number = false;
};

struct Node {
  int id = -1;
  std::string op;
  std::vector<int> inputs;
  std::vector<int> outputs;
  Attrs attrs;
};

class Graph {
 public:
  int add_input(const TensorType& t, const std::string& name = "");
  // A 0-dim constant. wrapped_number=true for Python scalars.
  int add_constant(double value, DType dtype, bool wrapped_number = false);
  // Adds an op (or its decomposition into primitives, for composite ops such as softmax) after
  // inferring its output types with the op table; returns the output value ids. Throws
  // flow::dsl::OpError with a torch-like message on bad shapes, dtypes or attributes.
  std::vector<int> add_op(const std::string& op, const std::vector<int>& inputs, const Attrs& attrs = {});
  int add(const std::string& op, const std::vector<int>& inputs, const Attrs& attrs = {});  // one output
  void mark_output(int value);
  // Autocast (dsl/autocast.h): while a policy is set, add_op first casts the inputs of each op added
  // from outside (not the primitives of a composite) by the op's autocast class. Not part of the
  // graph's identity: the casts it adds are ordinary nodes.
  void set_autocast(std::optional<AutocastPolicy> policy) { autocast_ = policy; }
  const std::optional<AutocastPolicy>& autocast() const { return autocast_; }
  // `value` cast to `dtype` by autocast: one cast node per (value, dtype), reused by later ops.
  int autocast_cast(int value, DType dtype);

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  const Value& value(int id) const { return values_.at(id); }
  const Node& node(int id) const { return nodes_.at(id); }
  // Nodes that read value `id` (computed on demand).
  std::vector<int> consumers(int value) const;

  std::string to_string() const;
  void serialize(std::string& out) const;  // canonical bytes (names of inputs excluded)
  // Reads serialize()'s bytes back (a saved model's graph). Throws std::runtime_error for bytes
  // that are malformed, of another format version, or describe an inconsistent graph.
  static Graph deserialize(const std::string& bytes);
  Hash128 hash() const;

  // Low-level append used by add_op and by passes; does no inference.
  int append_value(const TensorType& t, ValueKind kind, int producer);
  int append_node(const std::string& op, const std::vector<int>& inputs, const std::vector<TensorType>& outs,
                  const Attrs& attrs);

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  // add_op after the argument checks and autocast: decompose, or infer and append.
  std::vector<int> add_op_body(const OpDef& def, const std::string& op, const std::vector<int>& inputs,
                               const Attrs& attrs);
  std::optional<AutocastPolicy> autocast_;
  std::map<std::pair<int, DType>, int> autocast_casts_;  // (value, dtype) -> its autocast cast
  int add_depth_ = 0;  // nesting of add_op calls (composites add their primitives from inside)
};

// Errors in user input: the message reads like torch's (e.g. "The size of tensor a (3) must match
// the size of tensor b (4) at non-singleton dimension 1"). `kind` selects the Python exception.
struct OpError : std::runtime_error {
  enum class Kind { Value, Type, Index, NotImplemented };
  OpError(Kind k, const std::string& msg) : std::runtime_error(msg), kind(k) {}
  Kind kind;
};

// torch's "index 7 is out of bounds for dimension 0 with size 5", as an OpError of `kind`.
[[noreturn]] void throw_index_out_of_bounds(int64_t index, int64_t size, int64_t dim,
                                            OpError::Kind kind = OpError::Kind::Index);
// The same for a CheckIndex report, whose dim argument also says the exception (dsl/expr.h).
[[noreturn]] void throw_check_index_report(int64_t index, int64_t size, int64_t tagged_dim);

// Attribute accessors that raise OpError naming the op and attribute when missing or mistyped.
int64_t attr_int(const Attrs& a, const std::string& key, const std::string& op);
double attr_float(const Attrs& a, const std::string& key, const std::string& op);
bool attr_bool(const Attrs& a, const std::string& key, const std::string& op);
std::string attr_str(const Attrs& a, const std::string& key, const std::string& op);
std::vector<int64_t> attr_ints(const Attrs& a, const std::string& key, const std::string& op);
const AttrValue* attr_find(const Attrs& a, const std::string& key);

}  // namespace flow::dsl

// Note: the op registry and the helpers every entry shares (broadcasting, torch type promotion,
// dim normalization). Built-in ops are registered by register_builtin_ops() on the first call of
// lookup_op/find_op/all_op_names/register_op, under std::call_once: static initializers in a static
// library are dropped by the linker when nothing references their object file, so the table must
// not depend on them. A mutex guards the map, so lookups are safe from any thread; the returned
// references stay valid for the life of the process (std::map nodes never move, entries are never
// removed).
#include "dsl/op_table.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<const OpDef>> ops;
};

Registry& registry() {
  static Registry r;
  return r;
}

void register_builtin_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_elementwise_ops();
    register_reduction_ops();
    register_composite_ops();
    register_view_ops();
    register_injective_ops();
    register_library_ops();
    register_elementwise_more_ops();
    register_bitcast_ops();
    register_reduction_more_ops();
    register_norm_ops();
    register_random_ops();
    register_sort_ops();
    register_scatter_ops();
    register_embedding_bag_ops();
  });
}

}  // namespace

const char* op_pattern_name(OpPattern p) {
  switch (p) {
    case OpPattern::Elementwise:
      return "elementwise";
    case OpPattern::Injective:
      return "injective";
    case OpPattern::Reduction:
      return "reduction";
    case OpPattern::OutEWiseFusable:
      return "out_ewise_fusable";
    case OpPattern::Opaque:
      return "opaque";
    case OpPattern::View:
      return "view";
    case OpPattern::Composite:
      return "composite";
  }
  return "<invalid pattern>";
}

void register_builtin(OpDef def) {
  if (def.name.empty()) throw std::logic_error("register_op: empty op name");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const std::string name = def.name;
  if (r.ops.count(name)) throw std::logic_error("register_op: op '" + name + "' is already registered");
  r.ops.emplace(name, std::make_unique<const OpDef>(std::move(def)));
}

void register_op(OpDef def) {
  register_builtin_ops();
  register_builtin(std::move(def));
}

const OpDef* find_op(const std::string& name) {
  register_builtin_ops();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : it->second.get();
}

const OpDef& lookup_op(const std::string& name) {
  const OpDef* def = find_op(name);
  if (!def) throw OpError(OpError::Kind::NotImplemented, "flow: unknown op '" + name + "'");
  return *def;
}

std::vector<std::string> all_op_names() {
  register_builtin_ops();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& entry : r.ops) names.push_back(entry.first);
  return names;
}

OpContext make_op_context(const Graph& g, const Node& n) {
  OpContext ctx;
  ctx.inputs = value_types(g, n.inputs);
  ctx.outputs = value_types(g, n.outputs);
  ctx.attrs = &n.attrs;
  ctx.wrapped_number = wrapped_flags(g, n.inputs);
  return ctx;
}

// ---- shared helpers ---------------------------------------------------------------------------

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {  // i counts from the right
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      throw OpError(OpError::Kind::Value, "The size of tensor a (" + std::to_string(da) +
                                              ") must match the size of tensor b (" + std::to_string(db) +
                                              ") at non-singleton dimension " + std::to_string(n - 1 - i));
    }
    out[n - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

void promote_into(std::optional<DType>& acc, DType t) {
  acc = acc ? promote_types(*acc, t) : t;
}

// torch's combine_categories(higher, lower) (c10/core/ScalarType / TypeProperties.cpp), without
// complex types: the higher-priority group wins unless the lower one has a higher category.
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

DType result_type(const std::vector<TensorType>& types, const std::vector<bool>& wrapped) {
  std::optional<DType> dim_result, zero_result, wrapped_result;
  for (size_t i = 0; i < types.size(); ++i) {
    const DType t = types[i].dtype;
    if (i < wrapped.size() && wrapped[i]) {
      promote_into(wrapped_result, is_floating(t) ? DType::Float32 : t);  // default dtype
    } else if (types[i].shape.empty()) {
      promote_into(zero_result, t);
    } else {
      promote_into(dim_result, t);
    }
  }
  const std::optional<DType> r = combine_categories(dim_result, combine_categories(zero_result, wrapped_result));
  if (!r) throw std::logic_error("result_type: no operands");
  return *r;
}

Expr operand_as(const Expr& x, DType own, DType common, bool round_to_half) {
  const DType ct = compute_dtype(common);
  if ((is_small_int(common) || (round_to_half && is_half(common))) && own != common) return cast(ct, cast(common, x));
  return cast(ct, x);
}

bool rounds_operands_to_half(const std::string& op) {
  static const std::set<std::string> rounding = {"eq",  "ne",  "lt",  "le",   "gt",       "ge",
                                                 "add", "sub", "pow", "fmod", "remainder"};
  return rounding.count(op) > 0;
}

DType result_type(const Graph& g, const std::vector<int>& values) {
  return result_type(value_types(g, values), wrapped_flags(g, values));
}

const char* torch_dtype_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "Bool";
    case DType::Int32:
      return "Int";
    case DType::Int64:
      return "Long";
    case DType::Float16:
      return "Half";
    case DType::BFloat16:
      return "BFloat16";
    case DType::Float32:
      return "Float";
    case DType::Float64:
      return "Double";
    case DType::UInt8:
      return "Byte";
    case DType::Int8:
      return "Char";
    case DType::Int16:
      return "Short";
  }
  return "<invalid dtype>";
}

int64_t normalize_dim(int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor takes dims as if it were 1-d
  if (dim < -n || dim >= n) {
    throw OpError(OpError::Kind::Index, "Dimension out of range (expected to be in range of [" + std::to_string(-n) +
                                            ", " + std::to_string(n - 1) + "], but got " + std::to_string(dim) + ")");
  }
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    const int64_t nd = normalize_dim(d, ndim);
    if (std::find(out.begin(), out.end(), nd) != out.end()) {
      throw OpError(OpError::Kind::Value, "dim " + std::to_string(nd) + " appears multiple times in the list of dims");
    }
    out.push_back(nd);
  }
  std::sort(out.begin(), out.end());
  if (ndim == 0) out.clear();  // dim 0 / -1 of a 0-dim tensor names no actual dimension
  return out;
}

void check_attrs(const std::string& op, const Attrs& attrs, std::initializer_list<const char*> allowed) {
  for (const auto& entry : attrs) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || entry.first == a;
    if (!ok) throw OpError(OpError::Kind::Type, op + "(): unexpected attribute '" + entry.first + "'");
  }
}

DType attr_dtype(const Attrs& attrs, const std::string& key, const std::string& op) {
  const std::string name = attr_str(attrs, key, op);
  try {
    return dtype_from_name(name);
  } catch (const std::invalid_argument&) {
    throw OpError(OpError::Kind::Type, op + "(): attribute '" + key + "' is not a dtype: '" + name + "'");
  }
}

std::vector<TensorType> value_types(const Graph& g, const std::vector<int>& ids) {
  std::vector<TensorType> out;
  out.reserve(ids.size());
  for (int id : ids) out.push_back(g.value(id).type);
  return out;
}

std::vector<bool> wrapped_flags(const Graph& g, const std::vector<int>& ids) {
  std::vector<bool> out;
  out.reserve(ids.size());
  for (int id : ids) out.push_back(g.value(id).wrapped_number);
  return out;
}

}  // namespace flow::dsl

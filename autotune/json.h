// Note: a small JSON value for the tuning records (JSON lines) and bundle manifests read from C++.
// It parses the whole of RFC 8259 except that numbers are kept as double (every integer the records
// hold is far below 2^53) and object member order is preserved (so a record prints back as it was
// written). Malformed text throws JsonError with the byte offset; nothing else is thrown.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace flow::autotune {

struct JsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;  // null
  Json(bool b) : kind_(Kind::Bool), bool_(b) {}
  Json(double d) : kind_(Kind::Number), number_(d) {}
  Json(int v) : kind_(Kind::Number), number_(v) {}
  Json(int64_t v) : kind_(Kind::Number), number_(static_cast<double>(v)) {}
  Json(const char* s) : kind_(Kind::String), string_(s) {}
  Json(std::string s) : kind_(Kind::String), string_(std::move(s)) {}
  Json(Array a) : kind_(Kind::Array), array_(std::move(a)) {}
  Json(Object o) : kind_(Kind::Object), object_(std::move(o)) {}

  static Json parse(const std::string& text);
  std::string dump() const;  // compact, one line

  bool is_null() const { return kind_ == Kind::Null; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_number() const { return kind_ == Kind::Number; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }

  // Typed access; throws JsonError naming the expected kind.
  bool as_bool() const;
  double as_number() const;
  int64_t as_int() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // Object members: find returns nullptr when absent; at throws JsonError naming the key.
  const Json* find(const std::string& key) const;
  const Json& at(const std::string& key) const;
  // Sets (or replaces) a member; the value must be an object.
  Json& set(const std::string& key, Json value);

 private:
  // Plain members rather than a recursive std::variant (which trips GCC 12's maybe-uninitialized).
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object } kind_ = Kind::Null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  Array array_;
  Object object_;
};

// The JSON text of a string (quoted and escaped).
std::string json_quote(const std::string& s);

}  // namespace flow::autotune

#include "autotune/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace flow::autotune {

namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  Json document() {
    Json v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("trailing characters after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw JsonError("JSON: " + what + " at offset " + std::to_string(pos_));
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(pos_, w.size(), w) == 0) {
      pos_ += w.size();
      return true;
    }
    return false;
  }

  Json value(int depth) {
    if (depth > 64) fail("nesting deeper than 64");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of input");
    const char c = s_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Json(string());
    if (literal("true")) return Json(true);
    if (literal("false")) return Json(false);
    if (literal("null")) return Json();
    return Json(number());
  }

  Json object(int depth) {
    ++pos_;
    Json::Object members;
    if (consume('}')) return Json(std::move(members));
    do {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a member name");
      std::string key = string();
      expect(':');
      members.emplace_back(std::move(key), value(depth + 1));
    } while (consume(','));
    expect('}');
    return Json(std::move(members));
  }

  Json array(int depth) {
    ++pos_;
    Json::Array items;
    if (consume(']')) return Json(std::move(items));
    do {
      items.push_back(value(depth + 1));
    } while (consume(','));
    expect(']');
    return Json(std::move(items));
  }

  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("bad \\u escape");
    }
    return v;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(pos_, 2, "\\u") == 0) {
            pos_ += 2;
            const uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  double number() {
    const size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t d0 = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > d0;
    };
    if (!digits()) fail("expected a value");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) fail("expected digits after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) fail("expected exponent digits");
    }
    return std::strtod(s_.substr(start, pos_ - start).c_str(), nullptr);
  }

  const std::string& s_;
  size_t pos_ = 0;
};

void dump_to(const Json& j, std::string& out) {
  if (j.is_null()) {
    out += "null";
  } else if (j.is_bool()) {
    out += j.as_bool() ? "true" : "false";
  } else if (j.is_number()) {
    const double d = j.as_number();
    if (!std::isfinite(d)) {
      out += "null";  // JSON has no inf/nan
    } else if (d == std::floor(d) && std::fabs(d) < 9.0e15) {
      out += std::to_string(static_cast<int64_t>(d));
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", d);
      out += buf;
    }
  } else if (j.is_string()) {
    out += json_quote(j.as_string());
  } else if (j.is_array()) {
    out += '[';
    bool first = true;
    for (const Json& x : j.as_array()) {
      if (!first) out += ',';
      first = false;
      dump_to(x, out);
    }
    out += ']';
  } else {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : j.as_object()) {
      if (!first) out += ',';
      first = false;
      out += json_quote(k);
      out += ':';
      dump_to(v, out);
    }
    out += '}';
  }
}

}  // namespace

Json Json::parse(const std::string& text) {
  return Parser(text).document();
}

std::string Json::dump() const {
  std::string out;
  dump_to(*this, out);
  return out;
}

bool Json::as_bool() const {
  if (!is_bool()) throw JsonError("JSON: expected a boolean");
  return bool_;
}
double Json::as_number() const {
  if (!is_number()) throw JsonError("JSON: expected a number");
  return number_;
}
int64_t Json::as_int() const {
  const double d = as_number();
  if (d != std::floor(d) || std::fabs(d) > 9.0e15) throw JsonError("JSON: expected an integer");
  return static_cast<int64_t>(d);
}
const std::string& Json::as_string() const {
  if (!is_string()) throw JsonError("JSON: expected a string");
  return string_;
}
const Json::Array& Json::as_array() const {
  if (!is_array()) throw JsonError("JSON: expected an array");
  return array_;
}
const Json::Object& Json::as_object() const {
  if (!is_object()) throw JsonError("JSON: expected an object");
  return object_;
}

const Json* Json::find(const std::string& key) const {
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

const Json& Json::at(const std::string& key) const {
  const Json* v = find(key);
  if (!v) throw JsonError("JSON: missing member '" + key + "'");
  return *v;
}

Json& Json::set(const std::string& key, Json value) {
  if (!is_object()) throw JsonError("JSON: set on a non-object");
  auto& members = object_;
  for (auto& [k, v] : members)
    if (k == key) {
      v = std::move(value);
      return v;
    }
  members.emplace_back(key, std::move(value));
  return members.back().second;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace flow::autotune

#include "jit/log.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace flow::jit {
namespace {

std::string normalize(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::vector<std::string> split_topics(const std::string& spec) {
  std::vector<std::string> topics;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const size_t end = comma == std::string::npos ? spec.size() : comma;
    std::string t = normalize(spec.substr(start, end - start));
    if (!t.empty()) topics.push_back(std::move(t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return topics;
}

struct LogConfig {
  bool all = false;
  std::vector<std::string> topics;
  LogConfig() {
    const char* env = std::getenv("FLOW_LOG");
    if (env == nullptr) return;
    topics = split_topics(env);
    for (const std::string& t : topics) all = all || t == "all";
  }
};

const LogConfig& config() {
  static const LogConfig c;
  return c;
}

}  // namespace

bool log_spec_enables(const std::string& spec, const std::string& topic) {
  const std::string want = normalize(topic);
  for (const std::string& t : split_topics(spec)) {
    if (t == "all" || t == want) return true;
  }
  return false;
}

bool log_enabled(const char* topic) {
  const LogConfig& c = config();
  if (c.all) return true;
  if (c.topics.empty()) return false;
  const std::string want = normalize(topic);
  for (const std::string& t : c.topics) {
    if (t == want) return true;
  }
  return false;
}

void log_line(const char* topic, const std::string& msg) {
  const std::string line = std::string("[flow:") + topic + "] " + msg + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace flow::jit

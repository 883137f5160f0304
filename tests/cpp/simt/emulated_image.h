// The "cubin" the emulated NVRTC (emulated_nvrtc.cpp) hands back and the emulated driver
// (emulated_driver.cpp) loads: the CUDA source and its in-memory headers, so the driver can build
// the very text NVRTC compiled for the host. Length-prefixed after a magic line, because
// cuModuleLoadData receives a pointer without a size; it ends in a NUL, as flow keeps images in a
// std::string and may also pass a PTX text the same way.
#pragma once
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace flow::test::simt {

inline constexpr const char kEmulatedImageMagic[] = "FLOW-EMULATED-CUDA-IMAGE 1\n";

struct EmulatedImage {
  std::string source;
  std::vector<std::pair<std::string, std::string>> headers;  // (include name, text)
};

inline std::string serialize_emulated_image(const EmulatedImage& image) {
  std::string out = kEmulatedImageMagic;
  auto put = [&out](const std::string& s) {
    out += std::to_string(s.size());
    out += '\n';
    out += s;
  };
  put(image.source);
  out += std::to_string(image.headers.size()) + "\n";
  for (const auto& [name, text] : image.headers) {
    put(name);
    put(text);
  }
  return out;
}

// False when `data` is not such an image.
inline bool parse_emulated_image(const char* data, EmulatedImage& image) {
  const size_t magic = std::strlen(kEmulatedImageMagic);
  if (std::strncmp(data, kEmulatedImageMagic, magic) != 0) return false;
  const char* p = data + magic;
  auto number = [&p](size_t& n) {
    char* end = nullptr;
    n = std::strtoull(p, &end, 10);
    if (end == p || *end != '\n') return false;
    p = end + 1;
    return true;
  };
  auto get = [&](std::string& s) {
    size_t n = 0;
    if (!number(n)) return false;
    s.assign(p, n);
    p += n;
    return true;
  };
  size_t count = 0;
  if (!get(image.source) || !number(count)) return false;
  image.headers.resize(count);
  for (auto& [name, text] : image.headers)
    if (!get(name) || !get(text)) return false;
  return true;
}

}  // namespace flow::test::simt

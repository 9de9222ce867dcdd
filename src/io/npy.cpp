#include "io/npy.h"

#include <cstring>
#include <fstream>
#include <regex>

#include "core/error.h"

namespace fathom {

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ", ";
    n *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma; (3, 4) does not
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to 64 bytes.
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  check(bool(out), "npy: cannot create ", path);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data), std::streamsize(n * 4));
  check(bool(out), "npy: write failed for ", path);
}

std::vector<float> read_npy_f32(const std::string& path, std::vector<int64_t>& shape) {
  std::ifstream in(path, std::ios::binary);
  check(bool(in), "npy: cannot open ", path);
  char magic[10];
  in.read(magic, 10);
  check(in && std::memcmp(magic, "\x93NUMPY", 6) == 0 && magic[6] == 1, "npy: ", path, " is not a version 1 .npy");
  uint16_t len;
  std::memcpy(&len, magic + 8, 2);
  std::string header(len, '\0');
  in.read(header.data(), len);
  check(header.find("'<f4'") != std::string::npos && header.find("False") != std::string::npos,
        "npy: ", path, " is not little-endian float32 in C order");
  std::smatch m;
  check(std::regex_search(header, m, std::regex("\\(([0-9, ]*)\\)")), "npy: ", path, " has no shape");
  shape.clear();
  int64_t n = 1;
  std::string dims = m[1];
  for (size_t pos = 0; pos < dims.size();) {
    size_t end = dims.find(',', pos);
    std::string part = dims.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (part.find_first_of("0123456789") != std::string::npos) {
      shape.push_back(std::stoll(part));
      n *= shape.back();
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  std::vector<float> data(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(data.data()), std::streamsize(n * 4));
  check(bool(in), "npy: ", path, " is truncated");
  return data;
}

}  // namespace fathom

#pragma once
// NumPy .npy files (format 1.0, little-endian float32, C order).
#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);
// Reads a float32 C-order .npy; returns the data and fills `shape`.
std::vector<float> read_npy_f32(const std::string& path, std::vector<int64_t>& shape);

}  // namespace fathom

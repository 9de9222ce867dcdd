// parse_safetensors_header over arbitrary bytes: fathom::Error or a map whose every
// tensor lies inside the file; never a read outside `head`.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"
#include "fuzz_common.h"
#include "io/safetensors.h"

namespace {

void parse_with_size(std::string_view head, uint64_t file_size) {
  try {
    const auto tensors = fathom::parse_safetensors_header(head, file_size, "fuzz.safetensors");
    for (const auto& [name, t] : tensors) {
      FUZZ_CHECK(t.offset <= file_size && t.nbytes <= file_size - t.offset,
                 "tensor %s [%zu, +%zu) outside a file of %llu bytes", name.c_str(), t.offset, t.nbytes,
                 (unsigned long long)file_size);
      FUZZ_CHECK(t.offset >= 8, "tensor %s starts inside the length prefix", name.c_str());
    }
  } catch (const fathom::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so ASan sees any read past the head.
  std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::string_view head(bytes);
  parse_with_size(head, size);
  // The head as the start of a larger file, by an amount the input chooses (its last
  // 4 bytes), and a file near the top of uint64_t (offset arithmetic that wraps).
  if (size >= 4) {
    uint32_t extra;
    std::memcpy(&extra, data + size - 4, 4);
    parse_with_size(head, uint64_t(size) + extra);
    parse_with_size(head, UINT64_MAX - (extra & 0xffff));
  }
  (void)fathom::is_plain_shard_name(head);
  return 0;
}

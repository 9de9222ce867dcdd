#pragma once
// Sizes as people write them: "12GiB", "800MB", "1.5GB", "2G", "1048576".
#include <cstdint>
#include <string>

namespace fathom {

// Bytes in `text`: a number (decimals allowed) and an optional unit, any case:
// B; KB, MB, GB, TB (powers of 1000); KiB, MiB, GiB, TiB and K, M, G, T
// (powers of 1024). Throws fathom::Error naming `what` and the text for
// anything else, for zero, and for sizes beyond 2^62 bytes.
int64_t parse_byte_size(const std::string& text, const std::string& what);

// "1.25 GiB", "812.0 MiB", "512 B": for tables meant for people.
std::string format_bytes(int64_t bytes);

}  // namespace fathom

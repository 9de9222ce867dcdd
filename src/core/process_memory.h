#pragma once
// What the kernel says this process holds: the numbers the memory contract
// is measured against.
#include <cstdint>

namespace fathom {

// Resident set size now (VmRSS), in bytes; 0 when /proc cannot be read.
int64_t resident_bytes();
// The largest resident set size so far (getrusage's ru_maxrss), in bytes.
int64_t peak_resident_bytes();

}  // namespace fathom

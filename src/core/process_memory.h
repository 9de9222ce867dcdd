#pragma once
// What the kernel says this process holds: the numbers the memory contract
// is measured against.
#include <cstdint>
#include <string_view>

namespace fathom {

// Resident set size now (VmRSS), in bytes; 0 when /proc cannot be read.
int64_t resident_bytes();
// The largest resident set size so far (getrusage's ru_maxrss), in bytes.
int64_t peak_resident_bytes();
// What one more thread of ours makes resident: glibc gives each new thread a
// copy of every loaded module's static thread-local storage, zero-filled in
// full (so cuBLAS's ~100 KB of it is resident in every thread of a CUDA
// build), beside the stack pages the thread touches.
int64_t thread_resident_bytes();
// Bytes of this process's file mappings whose path ends with `suffix` (the
// mmapped weights: ".safetensors") that are not resident yet: they will be
// once every weight has been read.
int64_t mapped_files_absent_bytes(std::string_view suffix);

}  // namespace fathom

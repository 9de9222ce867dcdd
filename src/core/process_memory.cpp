#include "core/process_memory.h"

#include <link.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>

namespace fathom {

int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return 0;
}

int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_maxrss) * 1024;
}

int64_t mapped_files_absent_bytes(std::string_view suffix) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  int64_t absent = 0, size = 0;
  bool matching = false;
  while (std::getline(smaps, line)) {
    // A mapping's header: "start-end perms offset dev inode [path]".
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find(' ') > dash) {
      const size_t slash = line.find('/');
      const std::string_view path = slash == std::string::npos ? std::string_view{} : std::string_view(line).substr(slash);
      matching = path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
      size = int64_t(std::stoull(line.substr(dash + 1), nullptr, 16) - std::stoull(line.substr(0, dash), nullptr, 16));
    } else if (matching && line.rfind("Rss:", 0) == 0) {
      absent += std::max<int64_t>(0, size - std::atoll(line.c_str() + 4) * 1024);
      matching = false;
    }
  }
  return absent;
}

int64_t thread_resident_bytes() {
  // The deepest stack an HTTP or engine thread was seen to touch, serving
  // requests, with the thread's descriptor: about 50 KiB, rounded up.
  constexpr int64_t kStackTouched = 64 << 10;
  int64_t tls = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* sum) {
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_TLS) {
            const int64_t align = std::max<int64_t>(1, int64_t(info->dlpi_phdr[i].p_align));
            *static_cast<int64_t*>(sum) += (int64_t(info->dlpi_phdr[i].p_memsz) + align - 1) / align * align;
          }
        return 0;
      },
      &tls);
  constexpr int64_t kPage = 4096;
  return (tls + kPage - 1) / kPage * kPage + kStackTouched;
}

}  // namespace fathom

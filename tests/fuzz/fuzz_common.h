#pragma once
// Shared by the fuzz targets: a failed property is a crash with a message, so
// libFuzzer saves the input (abort() is the finding, not a path users reach).
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

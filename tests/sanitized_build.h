// Whether this test binary was built with a sanitizer (scripts/sanitize.sh).
// There, timings and resident memory say nothing about a release build, and
// the work runs several times slower: tests that measure either, or that draw
// thousands of samples, check or draw less (and say so where they skip).
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FATHOM_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FATHOM_SANITIZED_BUILD 1
#endif
#endif

namespace fathom::testing {
#ifdef FATHOM_SANITIZED_BUILD
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
}  // namespace fathom::testing

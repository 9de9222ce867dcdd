// SSE framing and stop strings over hostile text.
// SSE: payloads holding the fuzzed bytes (invalid UTF-8, newlines, as keys, values
// and parsed JSON) frame as "data: <one line>\n\n"; dump_json never throws.
// Stop strings: input = stop \0 stop \0 ... \0 text (no NUL: default stops). Over
// every chunking the emitted text is a prefix of the text, never holds a stop string,
// stops exactly when the text holds one and right before one; unstopped, emit + flush
// is the whole text.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_chunks.h"
#include "fuzz_common.h"
#include "server/sse.h"
#include "text/stop_strings.h"

namespace {

using ojson = nlohmann::ordered_json;

void check_frame(const std::string& frame, std::string_view prefix) {
  FUZZ_CHECK(frame.size() >= prefix.size() + 2 && frame.compare(0, prefix.size(), prefix) == 0,
             "frame does not start with its prefix");
  FUZZ_CHECK(frame.compare(frame.size() - 2, 2, "\n\n") == 0, "frame does not end with a blank line");
  const std::string_view payload(frame.data() + prefix.size(), frame.size() - prefix.size() - 2);
  FUZZ_CHECK(payload.find_first_of("\r\n") == std::string_view::npos, "payload breaks the frame: %s",
             frame.c_str());
}

void check_sse(std::string_view bytes) {
  const std::string s(bytes);
  double number = 0;
  if (bytes.size() >= 8) std::memcpy(&number, bytes.data(), 8);  // NaN and infinities too
  std::vector<ojson> payloads = {
      ojson(s),
      ojson{{"choices", ojson::array({ojson{{"delta", {{"content", s}}}, {"index", 0}}})}},
      ojson{{s, s}, {"n", number}},
      ojson::array({s, number, nullptr, ojson::object({{"nested", ojson::array({s})}})}),
  };
  const ojson parsed = ojson::parse(s, nullptr, false);
  if (!parsed.is_discarded()) payloads.push_back(parsed);
  for (const ojson& p : payloads) {
    (void)fathom::server::dump_json(p);  // must not throw
    check_frame(fathom::server::sse_data(p), "data: ");
    check_frame(fathom::server::sse_event("content_block_delta", p), "event: content_block_delta\ndata: ");
  }
}

void check_stops(std::string_view input) {
  std::vector<std::string> stops;
  std::string_view text = input;
  for (size_t nul; (nul = text.find('\0')) != std::string_view::npos && stops.size() < 8;) {
    if (nul > 0) stops.emplace_back(text.substr(0, nul));
    text.remove_prefix(nul + 1);
  }
  if (stops.empty()) stops = {"\n\n", "</s>", "<|im_end|>"};

  size_t earliest = std::string_view::npos;  // where the first stop string starts
  for (const auto& s : stops) earliest = std::min(earliest, text.find(s));

  for (const auto& chunks : fuzz::chunkings(text)) {
    fathom::StopStringMatcher matcher(stops);
    std::string emitted;
    bool stopped = false;
    for (std::string_view c : chunks) {
      const auto step = matcher.push(c);
      emitted += step.emit;
      if (step.stopped) {
        stopped = true;
        break;
      }
    }
    const std::string rest = matcher.flush();
    FUZZ_CHECK(!stopped || rest.empty(), "flush after a stop gave text");
    emitted += rest;
    FUZZ_CHECK(text.substr(0, emitted.size()) == emitted, "emitted text is not a prefix of the text");
    FUZZ_CHECK(stopped == (earliest != std::string_view::npos), "stopped=%d but the text %s a stop string",
               int(stopped), earliest != std::string_view::npos ? "holds" : "does not hold");
    for (const auto& s : stops)
      FUZZ_CHECK(emitted.find(s) == std::string::npos, "a stop string reached the output");
    if (stopped) {
      FUZZ_CHECK(emitted.size() >= earliest, "stopped before the first stop string");
      bool at_stop = false;
      for (const auto& s : stops) at_stop |= text.substr(emitted.size(), s.size()) == s;
      FUZZ_CHECK(at_stop, "output ends at %zu, not right before a stop string", emitted.size());
    } else {
      FUZZ_CHECK(emitted == text, "unstopped output is not the whole text");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_sse(input);
  check_stops(input);
  return 0;
}

// Tokenizer throughput: MB/s of text encoded (and decoded) per tokenizer, one thread.
//
// Build + run:
//   scripts/fetch_tokenizers.sh
//   cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build tokenizer_bench
//   build/tokenizer_bench [--mb 4] [--reps 3] [--tokenizers DIR] [--only qwen3,llama3_1,gemma3]
// --only takes any tokenizer folders fetch_tokenizers.sh wrote (the sweep's too: claude,
// deepseek_v3, gemini, gpt35turbo, gpt4o, gptoss, llama2, llama3); the default is the
// primary three.
//
// Corpora (each repeated until it holds --mb megabytes, then cut into documents of at
// most 64 KiB at line ends, as prompts are):
//   prose    - the license texts in /usr/share/common-licenses (English prose)
//   code     - this repository's C++ sources and headers under src/
//   fixtures - the strings of tests/fixtures/tokenizer/<name>.json (many scripts, emoji,
//              whitespace runs, very long words: the adversarial mix)
// For each (tokenizer, corpus) the first pass is reported as "cold" (the BPE word cache
// is empty) and the best of --reps later passes as "warm". MB = 1e6 bytes of UTF-8 input.
// Decode MB/s is bytes of decoded text per second over the ids of the warm pass.
// Prints one JSON object on stdout.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string prose_corpus() {
  std::string text;
  const fs::path dir = "/usr/share/common-licenses";
  if (!fs::exists(dir)) return text;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) text += read_file(f) + "\n";
  return text;
}

std::string code_corpus(const fs::path& src) {
  std::string text;
  if (!fs::exists(src)) return text;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    const auto ext = e.path().extension();
    if (e.is_regular_file() && (ext == ".cpp" || ext == ".h" || ext == ".inc")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) text += read_file(f) + "\n";
  return text;
}

std::string fixtures_corpus(const fs::path& fixture) {
  std::string text;
  if (!fs::exists(fixture)) return text;
  const auto j = nlohmann::json::parse(read_file(fixture));
  for (const auto& c : j["cases"]) text += c["text"].get<std::string>() + "\n";
  return text;
}

// Repeats `base` up to `bytes` and cuts it into documents of at most 64 KiB at line ends.
std::vector<std::string> documents(const std::string& base, size_t bytes) {
  std::vector<std::string> docs;
  if (base.empty()) return docs;
  std::string all;
  while (all.size() < bytes) all += base;
  all.resize(bytes);
  while (all.size() > 0 && (static_cast<unsigned char>(all.back()) & 0xC0) == 0x80) all.pop_back();
  if (!all.empty() && static_cast<unsigned char>(all.back()) >= 0xC0) all.pop_back();
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = std::min(all.size(), pos + 65536);
    if (end < all.size()) {
      const size_t nl = all.rfind('\n', end);
      if (nl != std::string::npos && nl > pos) end = nl + 1;
      else
        while (end > pos && (static_cast<unsigned char>(all[end]) & 0xC0) == 0x80) --end;
    }
    docs.push_back(all.substr(pos, end - pos));
    pos = end;
  }
  return docs;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  double mb = 4;
  int reps = 3;
  std::string dir = FATHOM_TOKENIZER_CACHE_DIR;
  std::string only = "qwen3,llama3_1,gemma3";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "tokenizer_bench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--mb") mb = std::stod(value());
    else if (a == "--reps") reps = std::stoi(value());
    else if (a == "--tokenizers") dir = value();
    else if (a == "--only") only = value();
    else {
      std::cerr << "usage: tokenizer_bench [--mb 4] [--reps 3] [--tokenizers DIR] [--only a,b]\n";
      return 2;
    }
  }
  const fs::path source_root = fs::path(FATHOM_TOKENIZER_FIXTURES_DIR).parent_path().parent_path().parent_path();
  const size_t bytes = size_t(mb * 1e6);
  nlohmann::json out;
  out["mb_per_corpus"] = mb;
  out["reps"] = reps;
  out["threads"] = 1;
  try {
    std::stringstream names(only);
    for (std::string name; std::getline(names, name, ',');) {
      const auto t0 = Clock::now();
      const fathom::Tokenizer tok = fathom::Tokenizer::load((fs::path(dir) / name).string());
      nlohmann::json r;
      r["load_seconds"] = seconds_since(t0);
      const std::vector<std::pair<std::string, std::string>> corpora = {
          {"prose", prose_corpus()},
          {"code", code_corpus(source_root / "src")},
          {"fixtures", fixtures_corpus(fs::path(FATHOM_TOKENIZER_FIXTURES_DIR) / (name + ".json"))}};
      for (const auto& [corpus_name, base] : corpora) {
        const auto docs = documents(base, bytes);
        if (docs.empty()) continue;
        size_t total = 0;
        for (const auto& d : docs) total += d.size();
        std::vector<std::vector<int32_t>> ids(docs.size());
        auto encode_all = [&] {
          const auto t = Clock::now();
          for (size_t k = 0; k < docs.size(); ++k) ids[k] = tok.encode(docs[k], false);
          return seconds_since(t);
        };
        const double cold = encode_all();
        double warm = 1e30;
        for (int rep = 0; rep < reps; ++rep) warm = std::min(warm, encode_all());
        size_t tokens = 0, decoded_bytes = 0;
        for (const auto& v : ids) tokens += v.size();
        double dec = 1e30;
        for (int rep = 0; rep < reps; ++rep) {
          const auto t = Clock::now();
          decoded_bytes = 0;
          for (const auto& v : ids) decoded_bytes += tok.decode(v).size();
          dec = std::min(dec, seconds_since(t));
        }
        r[corpus_name] = {{"bytes", total},
                          {"documents", docs.size()},
                          {"tokens", tokens},
                          {"encode_mb_s_cold", total / cold / 1e6},
                          {"encode_mb_s_warm", total / warm / 1e6},
                          {"decode_mb_s", decoded_bytes / dec / 1e6}};
      }
      out["tokenizers"][name] = r;
      std::cerr << "tokenizer_bench: " << name << " done\n";
    }
  } catch (const fathom::Error& e) {
    std::cerr << "tokenizer_bench: " << e.what() << "\n(run scripts/fetch_tokenizers.sh first?)\n";
    return 1;
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}

// fathom tokenize --model DIR --text "..." [--special]
// fathom detokenize --model DIR --ids 1,2,3   (--ids "" decodes nothing to "")
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "text/tokenizer/tokenizer.h"

namespace fathom::cli {

Command add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string model_dir, text;
    bool special = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("--model", o->model_dir, "Hugging Face model folder (tokenizer.json)")->required()->check(model_folder());
  app.add_option("--text", o->text, "text to encode")->required();
  app.add_flag("--special", o->special, "add the post-processor's special tokens (BOS/EOS)");
  return [o] {
    const Tokenizer tokenizer = Tokenizer::load(o->model_dir);
    std::printf("%s\n", nlohmann::json({{"ids", tokenizer.encode(o->text, o->special)}}).dump().c_str());
    return 0;
  };
}

Command add_detokenize_command(CLI::App& app) {
  struct Options {
    std::string model_dir, ids;
    bool skip_special = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("--model", o->model_dir, "Hugging Face model folder (tokenizer.json)")->required()->check(model_folder());
  app.add_option("--ids", o->ids, "comma-separated token ids")->required();
  app.add_flag("--skip-special", o->skip_special, "drop special tokens from the text");
  return [o] {
    const Tokenizer tokenizer = Tokenizer::load(o->model_dir);
    // An empty list is a legitimate request (an empty prompt): it decodes to "", as in
    // Hugging Face. Anything else goes through the strict id-list parser.
    const std::vector<int32_t> ids =
        o->ids.find_first_not_of(" \t") == std::string::npos ? std::vector<int32_t>{} : parse_id_list(o->ids, "--ids");
    for (int32_t id : ids) tokenizer.id_to_token(id);  // an unknown id is an error, not silently dropped
    std::printf("%s\n", nlohmann::json({{"text", tokenizer.decode(ids, o->skip_special)}}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  };
}

}  // namespace fathom::cli

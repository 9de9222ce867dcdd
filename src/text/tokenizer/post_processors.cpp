#include "text/tokenizer/post_processors.h"

#include <map>
#include <string>

#include "text/tokenizer/json_util.h"

namespace fathom::tok {

namespace {

// The single-sequence template: ids before and after the sequence.
class TemplatePost final : public PostProcessor {
 public:
  TemplatePost(std::vector<int32_t> before, std::vector<int32_t> after) : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class NoOpPost final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

class SequencePost final : public PostProcessor {
 public:
  explicit SequencePost(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& s : steps_) s->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::unique_ptr<PostProcessor> make_template(const json& j, const std::string& what) {
  const json& special = require_field(j, "special_tokens", what);
  check(special.is_object(), what, ": \"special_tokens\" must be an object");
  std::map<std::string, std::vector<int32_t>> ids_of;
  for (const auto& [name, entry] : special.items()) {
    const json& ids = require_field(entry, "ids", what + " special token \"" + name + "\"");
    check(ids.is_array(), what, ": special token \"", name, "\": \"ids\" must be an array");
    std::vector<int32_t> v;
    for (const auto& id : ids) v.push_back(require_token_id(id, what + ": an id of special token \"" + name + "\""));
    ids_of[name] = std::move(v);
  }
  const json& single = require_field(j, "single", what);
  check(single.is_array(), what, ": \"single\" must be an array of pieces");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const auto& piece : single) {
    check(piece.is_object() && piece.size() == 1, what, ": each template piece must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    if (piece.contains("Sequence")) {
      const std::string id = require_string(piece["Sequence"], "id", what + " Sequence");
      check(id == "A", what, ": a single-sequence template may only use sequence A, not \"", id, "\"");
      check(!seen_sequence, what, ": sequence A appears twice in the single template");
      seen_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      const std::string id = require_string(piece["SpecialToken"], "id", what + " SpecialToken");
      const auto it = ids_of.find(id);
      check(it != ids_of.end(), what, ": special token \"", id, "\" is used but not defined in special_tokens");
      auto& dst = seen_sequence ? after : before;
      dst.insert(dst.end(), it->second.begin(), it->second.end());
    } else {
      fail(what, ": unknown template piece ", piece.dump());
    }
  }
  check(seen_sequence, what, ": the single template has no $A");
  return std::make_unique<TemplatePost>(std::move(before), std::move(after));
}

// RobertaProcessing / BertProcessing: {"cls": ["<s>", 0], "sep": ["</s>", 2]}.
int32_t pair_id(const json& j, const char* key, const std::string& what) {
  const json& v = require_field(j, key, what);
  check(v.is_array() && v.size() == 2, what, ": \"", key, "\" must be [token, id]");
  return require_token_id(v[1], what + ": the id of \"" + key + "\"");
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, "post_processor");
  const std::string what = "post_processor " + type;
  if (type == "TemplateProcessing") return make_template(j, what);
  if (type == "ByteLevel") return std::make_unique<NoOpPost>();  // only trims offsets, which fathom has none of
  if (type == "RobertaProcessing" || type == "BertProcessing")
    return std::make_unique<TemplatePost>(std::vector<int32_t>{pair_id(j, "cls", what)},
                                          std::vector<int32_t>{pair_id(j, "sep", what)});
  if (type == "Sequence") {
    const json& list = require_field(j, "processors", what);
    check(list.is_array(), what, ": \"processors\" must be an array");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const auto& item : list) {
      auto step = make_post_processor(item);
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequencePost>(std::move(steps));
  }
  fail("unsupported post_processor type \"", type, "\"");
}

std::unique_ptr<PostProcessor> make_bos_eos_template(std::vector<int32_t> bos_ids, std::vector<int32_t> eos_ids) {
  return std::make_unique<TemplatePost>(std::move(bos_ids), std::move(eos_ids));
}

}  // namespace fathom::tok

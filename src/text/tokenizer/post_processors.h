#pragma once
// Post-processors: add a sequence's special tokens (BOS/EOS templates) when asked to
// (Hugging Face's TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing,
// Sequence). Only single sequences are encoded; pair templates are read and ignored.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace fathom::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

// A null JSON value means no post-processor (nullptr). Unknown types are an error.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j);

// "<bos>:0 $A:0 <eos>:0"-style single template built from ids (transformers' rebuild).
std::unique_ptr<PostProcessor> make_bos_eos_template(std::vector<int32_t> bos_ids, std::vector<int32_t> eos_ids);

}  // namespace fathom::tok

// fathom logits --model DIR --prompt-ids 5,17,42 --out FILE.npy
#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/error.h"
#include "engine/generator.h"
#include "io/npy.h"

namespace fathom::cli {

Command add_logits_command(CLI::App& app) {
  auto model = std::make_shared<ModelOptions>();
  auto ids_text = std::make_shared<std::string>();
  auto out_path = std::make_shared<std::string>();
  model->add_to(app);
  app.add_option("--prompt-ids", *ids_text, "comma-separated token ids");
  app.add_option("--out", *out_path, "output .npy file, float32 [T, vocab]");
  return [=] {
    if (model->maybe_describe_kv()) return 0;
    check(!ids_text->empty(), "--prompt-ids is required");
    check(!out_path->empty(), "--out is required");
    const std::vector<int32_t> ids = parse_id_list(*ids_text, "--prompt-ids");
    const MemoryContract contract = model->memory_contract();
    const auto policy = model->prefill_policy(contract);
    auto m = model->load();
    validate_token_ids(ids, m->config().vocab_size);
    auto state = m->new_state(int64_t(ids.size()));
    Tensor logits = prefill(*m, *state, ids, *policy, /*all_logits=*/true);
    write_npy_f32(*out_path, logits.data<float>(), logits.shape());
    return 0;
  };
}

}  // namespace fathom::cli

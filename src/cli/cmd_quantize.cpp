// fathom quantize --model IN --out OUT [--bits B] [--group-size G] [--mixed RECIPE] [--max-shard-size S]
// Writes IN's weights as an MLX-format quantized folder and prints what it did as JSON.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/byte_size.h"
#include "model/quantize_folder.h"

namespace fathom::cli {

Command add_quantize_command(CLI::App& app) {
  struct Options {
    std::string in, out;
    QuantizeOptions q;
    std::string max_shard_size = "5GB";
  };
  auto o = std::make_shared<Options>();
  app.add_option("--model", o->in, "Hugging Face model folder (f32, bf16 or f16 weights)")
      ->required()
      ->check(model_folder());
  app.add_option("--out", o->out, "folder to write the MLX-format quantized model to")->required();
  app.add_option("--bits", o->q.bits, "bits per weight: 2, 3, 4, 5, 6 or 8")->capture_default_str();
  app.add_option("--group-size", o->q.group_size, "weights per scale and bias: 32, 64 or 128")->capture_default_str();
  app.add_option("--mixed", o->q.mixed,
                 "mlx-lm's mixed recipe instead of --bits: mixed_2_6, mixed_3_4, mixed_3_5, mixed_3_6, mixed_3_8, "
                 "mixed_4_6 or mixed_4_8 (groups of 64)");
  app.add_option("--max-shard-size", o->max_shard_size,
                 "largest weights file to write (5GB, 800MiB, ...); more go into numbered shards with an index")
      ->capture_default_str();
  return [o] {
    o->q.max_shard_bytes = parse_byte_size(o->max_shard_size, "--max-shard-size");
    const QuantizeReport r = quantize_folder(o->in, o->out, o->q);
    nlohmann::json out = {{"out", o->out},
                          {"quantized_modules", r.quantized_modules},
                          {"kept_modules", r.kept_modules},
                          {"bytes_in", r.bytes_in},
                          {"bytes_out", r.bytes_out}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  };
}

}  // namespace fathom::cli

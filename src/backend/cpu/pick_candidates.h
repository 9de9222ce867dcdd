#pragma once
// The candidates of a sampled pick, for the host sampler (Sampler) and the
// CPU's picks (cpu::pick_token) alike; its own header, so that the engine's
// sampler does not take in every CPU kernel.
#include <cstdint>
#include <span>
#include <vector>

namespace fathom::cpu {

// The candidates of a draw from softmax(x) (x: logits already divided by the
// temperature; NaNs in it are made −inf, no candidate), in the order a draw
// walks them, with their probabilities normalized over the candidates:
// ranked (larger x first, the lower id among equals), the first top_k of
// them (0: all), then the fewest whose probabilities reach top_p (1: all),
// then those left whose probability is 0 or below min_p × the best one's
// taken out. Without top-k and top-p the walk is the best id first, then
// the others in id order (no ranking needed). Weights are exp(x − max) in
// double (best_exp_weights over a whole row).
struct PickCandidates {
  std::vector<int32_t> ids;
  std::vector<double> probs;
  std::vector<int32_t> order;  // scratch
  std::vector<double> weight;  // scratch, by id
};
void pick_candidates(std::span<float> x, int64_t top_k, float top_p, float min_p, PickCandidates& out);

}  // namespace fathom::cpu

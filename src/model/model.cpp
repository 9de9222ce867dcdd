// What every model shares: stepping a long forward in pieces, building a
// sequence's per-layer state from the config and the KV scheme, its bytes.
#include <algorithm>

#include "core/error.h"
#include "kv/rotating_kv_layer.h"
#include "model/model.h"

namespace fathom {

Tensor Model::forward(const std::vector<int32_t>& ids, SequenceState& state, bool all_logits) const {
  const int64_t t = int64_t(ids.size());
  if (t <= state.max_step) return forward_step(ids, state, all_logits);
  Tensor out = Tensor::empty({all_logits ? t : 1, config().vocab_size}, DType::f32);
  for (int64_t begin = 0; begin < t; begin += state.max_step) {
    const int64_t end = std::min(t, begin + state.max_step);
    const bool last = end == t;
    if (!all_logits && !last) {  // only the final piece's last row is wanted
      forward_step({ids.begin() + begin, ids.begin() + end}, state, false);
      continue;
    }
    Tensor piece = forward_step({ids.begin() + begin, ids.begin() + end}, state, all_logits);
    float* dst = out.data<float>() + (all_logits ? begin : 0) * config().vocab_size;
    std::copy(piece.data<float>(), piece.data<float>() + piece.numel(), dst);
  }
  return out;
}

Model::Model(const LoadOptions& options) : kv_scheme_(options.kv_scheme), sliding_step_(options.sliding_step) {
  check(sliding_step_ > 0, "load: sliding_step must be positive, got ", sliding_step_);
}

int64_t Model::kv_bytes_at(int64_t tokens) const {
  return kv_scheme_.bytes_at(config(), tokens, int64_t(dtype_size(plain_kv_dtype())), sliding_step_);
}

std::unique_ptr<SequenceState> Model::make_state(const ModelConfig& config, int64_t capacity) const {
  check(capacity > 0, "new sequence: capacity must be positive, got ", capacity);
  auto state = std::make_unique<SequenceState>();
  state->capacity = capacity;
  state->kv.resize(size_t(config.num_layers));
  state->recurrent.resize(size_t(config.num_layers));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const LayerKind kind = config.layer_types[size_t(i)];
    if (kind == LayerKind::linear_attention) {
      check(config.linear_attention.has_value(), "new sequence: layer ", i, " is linear_attention without sizes");
      const auto& la = *config.linear_attention;
      state->recurrent[size_t(i)] = std::make_unique<RecurrentState>(
          la.conv_dim(), la.conv_kernel, la.num_value_heads, la.key_head_dim, la.value_head_dim);
      continue;
    }
    if (!config.owns_kv(i)) continue;  // reads an earlier layer's cache
    const int64_t kv_heads = config.kv_heads_of(i), head_dim = config.head_dim_of(i);
    const int64_t rows = kv_layer_rows(config, i, capacity, sliding_step_);
    const LayerCodec codec = kv_scheme_.codec_for_layer(config, i);
    std::unique_ptr<KvLayer> layer =
        codec.kind == LayerCodec::Kind::plain
            ? make_plain_kv_layer(kv_heads, head_dim, rows, plain_kv_dtype())
            : make_codec_kv_layer(kv_heads, head_dim, rows, codec, kv_scheme_.quantized_kv_start(), plain_kv_dtype(),
                                  0x7e4b0u + uint64_t(i));
    if (kind == LayerKind::sliding_attention) {
      layer = make_rotating_kv_layer(std::move(layer), *config.sliding_window, capacity);
      state->max_step = sliding_step_;
    }
    state->kv[size_t(i)] = std::move(layer);
  }
  return state;
}

}  // namespace fathom

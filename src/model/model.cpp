// What every model shares: stepping a long forward in pieces, building a
// sequence's per-layer state from the config and the KV scheme, its bytes.
#include <algorithm>

#include "core/error.h"
#include "model/model.h"

namespace fathom {

Tensor Model::forward(const std::vector<int32_t>& ids, SequenceState& state, bool all_logits) const {
  const SequenceStep one[] = {{&state, ids, all_logits ? WantLogits::all : WantLogits::last}};
  return forward(one).logits;
}

StepOutput Model::forward(std::span<const SequenceStep> step) const {
  const ModelConfig& c = config();
  check(!step.empty(), "forward: an empty step");
  int64_t total_logit_rows = 0, total_picks = 0;
  bool split = false;
  for (size_t i = 0; i < step.size(); ++i) {
    const SequenceStep& s = step[i];
    check(s.state != nullptr, "forward: sequence ", i, " of the step has no state");
    const SequenceState& state = *s.state;
    const int64_t t = int64_t(s.ids.size());
    check(t > 0, "forward: sequence ", i, " of the step has no tokens");
    check(state.valid(), "forward: the sequence was invalidated by a failed speculative step");
    check(int64_t(state.kv.size()) == c.num_layers && int64_t(state.recurrent.size()) == c.num_layers,
          "forward: state has ", state.kv.size(), " layers, model ", c.num_layers);
    check(state.length() + t <= state.capacity, "forward: ", state.length(), " + ", t,
          " tokens exceed the sequence capacity of ", state.capacity);
    for (size_t j = 0; j < i; ++j)
      check(step[j].state != s.state, "forward: sequences ", j, " and ", i, " of the step share one state");
    for (int32_t id : s.ids)
      check(id >= 0 && id < c.vocab_size, "forward: token id ", id, " is out of range [0, ", c.vocab_size, ")");
    total_logit_rows += s.logit_rows();
    total_picks += s.picks();
    split = split || t > state.max_step;
  }
  StepOutput out;
  if (split) {
    out.logits = Tensor::empty({total_logit_rows, c.vocab_size}, DType::f32);
    out.picks = Tensor::empty({total_picks}, DType::i32);
  }
  // Steps of at most each state's max_step rows; a sequence's logits and
  // picks land at its offsets in `out` (all rows, or the last row of its last piece).
  std::vector<int64_t> done(step.size(), 0);
  for (;;) {
    StepLayout layout;
    std::vector<int64_t> dst, pick_dst;  // for each logit row and pick of this piece, its place in `out`
    int64_t offset = 0, pick_offset = 0;
    for (size_t i = 0; i < step.size(); ++i) {
      const SequenceStep& s = step[i];
      const int64_t t = int64_t(s.ids.size()), begin = done[i];
      if (begin < t) {
        const int64_t end = std::min(t, begin + s.state->max_step);
        const int64_t row = layout.rows();
        layout.segments.push_back({s.state, row, end - begin, s.state->length()});
        layout.ids.insert(layout.ids.end(), s.ids.begin() + begin, s.ids.begin() + end);
        for (int64_t r = begin; r < end; ++r) {
          if (s.logits == WantLogits::pick_all || (s.logits == WantLogits::pick && r == t - 1)) {
            layout.pick_rows.push_back(row + r - begin);
            layout.pick_rules.push_back(s.logits == WantLogits::pick ? s.pick_rule : PickRule{});
            pick_dst.push_back(pick_offset + (s.logits == WantLogits::pick_all ? r : 0));
          }
          const bool wanted = s.logits == WantLogits::all || (s.logits == WantLogits::last && r == t - 1);
          if (!wanted) continue;
          layout.logit_rows.push_back(row + r - begin);
          dst.push_back(offset + (s.logits == WantLogits::all ? r : 0));
        }
        done[i] = end;
      }
      offset += s.logit_rows();
      pick_offset += s.picks();
    }
    if (layout.segments.empty()) return out;
    StepOutput piece;
    if (replayable(layout)) backend_->run_step([&] { piece = forward_step(layout); });
    else piece = forward_step(layout);
    for (const auto& segment : layout.segments) segment.state->end_step(segment.rows);
    if (!split) return piece;
    for (size_t r = 0; r < dst.size(); ++r)
      std::copy_n(piece.logits.data<float>() + int64_t(r) * c.vocab_size, c.vocab_size,
                  out.logits.data<float>() + dst[r] * c.vocab_size);
    for (size_t r = 0; r < pick_dst.size(); ++r)
      out.picks.data<int32_t>()[pick_dst[r]] = piece.picks.data<int32_t>()[r];
  }
}

bool Model::replayable(const StepLayout& layout) const {
  // Decode rows and verify spans: many small ops, which a device may run
  // better as one recorded unit. A mixture of experts whose routing the
  // backend reads back on the host mid-step cannot be recorded.
  const ModelConfig& c = config();
  if (layout.rows() > kReplayableStepRows) return false;
  if ((c.num_experts != 0 || c.enable_moe_block) && !backend_->experts_on_device(layout.rows())) return false;
  return std::all_of(layout.segments.begin(), layout.segments.end(),
                     [](const auto& s) { return s.rows <= kReplayableSequenceRows; });
}

Model::Model(const LoadOptions& options)
    : backend_(make_backend(options.device)), kv_scheme_(options.kv_scheme), sliding_step_(options.sliding_step) {
  check(sliding_step_ > 0, "load: sliding_step must be positive, got ", sliding_step_);
}

int64_t Model::kv_bytes_at(int64_t tokens) const {
  return kv_scheme_.bytes_at(config(), tokens, int64_t(dtype_size(plain_kv_dtype())), sliding_step_);
}

int64_t Model::kv_bytes_per_token() const {
  return (kv_bytes_at(2 * kKvBlockTokens) - kv_bytes_at(kKvBlockTokens)) / kKvBlockTokens;
}

KvBlockPool& Model::kv_pool() const {
  std::call_once(pool_once_, [&] { pool_ = std::make_shared<KvBlockPool>(kv_block_bytes(config(), plain_kv_dtype()), backend_); });
  return *pool_;
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
          backend_, la.conv_dim(), la.conv_kernel, la.num_value_heads, la.key_head_dim, la.value_head_dim);
      continue;
    }
    if (!config.owns_kv(i)) continue;  // reads an earlier layer's cache
    const int64_t kv_heads = config.kv_heads_of(i), head_dim = config.head_dim_of(i);
    const int64_t block_bytes = kv_pool().block_bytes();
    const LayerCodec codec = kv_scheme_.codec_for_layer(config, i);
    KvLayerSpec spec;
    spec.plain = LayerCodec{}.format(kv_heads, head_dim, plain_kv_dtype(), block_bytes);
    if (codec.kind != LayerCodec::Kind::plain) spec.coded = codec.format(kv_heads, head_dim, plain_kv_dtype(), block_bytes);
    spec.start = kv_scheme_.quantized_kv_start();
    spec.capacity = capacity;
    spec.window = config.window_of(i);
    spec.step = sliding_step_;
    spec.rotation_seed = 0x7e4b0u + uint64_t(i);
    if (spec.window) state->max_step = sliding_step_;
    state->kv[size_t(i)] = make_kv_layer(pool_, spec);
  }
  return state;
}

}  // namespace fathom

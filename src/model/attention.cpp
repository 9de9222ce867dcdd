#include "model/attention.h"

#include "core/error.h"

namespace fathom {

SelfAttention SelfAttention::load(const WeightLoader& w, const std::string& prefix, const ModelConfig& c,
                                  int64_t layer) {
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  SelfAttention a;
  a.q = Linear::load(w, prefix + ".q_proj", q_dim, c.hidden_size, c.qkv_bias);
  a.k = Linear::load(w, prefix + ".k_proj", kv_dim, c.hidden_size, c.qkv_bias);
  a.v = Linear::load(w, prefix + ".v_proj", kv_dim, c.hidden_size, c.qkv_bias);
  a.o = Linear::load(w, prefix + ".o_proj", c.hidden_size, q_dim, c.o_bias);
  if (c.qk_norm) {
    a.q_norm = w.vector(prefix + ".q_norm.weight", c.head_dim);
    a.k_norm = w.vector(prefix + ".k_norm.weight", c.head_dim);
  }
  if (c.layer_types[layer] == LayerKind::sliding_attention) a.window = c.sliding_window;
  return a;
}

AttentionScratch::AttentionScratch(Backend& b, int64_t t, const ModelConfig& c)
    : q(b.empty({t, c.num_heads, c.head_dim}, DType::f32)),
      k(b.empty({t, c.num_kv_heads, c.head_dim}, DType::f32)),
      v(b.empty({t, c.num_kv_heads, c.head_dim}, DType::f32)),
      attn(b.empty({t, c.num_heads, c.head_dim}, DType::f32)) {}

void attend_segments(Backend& b, const StepLayout& layout, int64_t kv_layer, Tensor* k, const Tensor* v, Tensor& q,
                     AttentionParams params, Tensor& out, const QkRope* rope) {
  check(!rope || k, "attention: keys to turn but none to write");
  // Every sequence claims its rows before any view is taken: then one write
  // and one attention serve the whole step.
  thread_local std::vector<KvSegment> segments;
  segments.clear();
  for (const auto& segment : layout.segments) {
    KvLayer* kv = segment.state->kv[size_t(kv_layer)].get();
    check(kv != nullptr, "attention: the sequence has no KV layer ", kv_layer);
    if (k) {
      check(kv->length() == segment.first_position, "attention: rows at position ", segment.first_position,
            " for a KV layer holding ", kv->length());
      kv->claim(segment.rows);
    }
  }
  for (const auto& segment : layout.segments)
    segments.push_back({segment.state->kv[size_t(kv_layer)]->view(), segment.row, segment.rows,
                        segment.first_position});
  if (rope) b.rope_kv_write(segments, q, *k, *v, rope->norms, *rope->cos, *rope->sin);
  else if (k) b.kv_write(segments, *k, *v);
  b.attention(q, segments, params, out);
}

void run_self_attention(Backend& b, const SelfAttention& a, const ModelConfig& c, const Tensor& h, const Tensor& cos,
                        const Tensor& sin, AttentionParams params, const StepLayout& layout, int64_t layer,
                        AttentionScratch& s, Tensor& out, bool bf16) {
  const int64_t t = h.dim(0);
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  Tensor q2 = s.q.reshape({t, q_dim}), k2 = s.k.reshape({t, kv_dim}), v2 = s.v.reshape({t, kv_dim});
  const Backend::MatmulTarget qkv[] = {{&a.q.weight, a.q.bias ? &*a.q.bias : nullptr, &q2},
                                       {&a.k.weight, a.k.bias ? &*a.k.bias : nullptr, &k2},
                                       {&a.v.weight, a.v.bias ? &*a.v.bias : nullptr, &v2}};
  b.matmul_shared(h, qkv, bf16);
  QkRope rope{&cos, &sin, {}};
  if (a.q_norm) rope.norms = {&*a.q_norm, &*a.k_norm, float(c.rms_norm_eps)};
  params.window = a.window;
  attend_segments(b, layout, layer, &s.k, &s.v, s.q, params, s.attn, &rope);
  a.o(b, s.attn.reshape({t, q_dim}), out, bf16);
}

}  // namespace fathom

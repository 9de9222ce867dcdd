// Gemma 4 text (gemma4_text, and the language model inside gemma4 folders).
// Against Gemma 3: RMSNorms scale by w (not 1 + w); attention is scaled by 1
// (q/k norms fix the magnitude) and values get a scale-less RMSNorm too;
// global layers have their own head_dim / kv heads and a proportional RoPE,
// and with attention_k_eq_v take their values from the key projection; the
// last num_kv_shared_layers layers read an earlier layer's cache (and have a
// double-wide MLP when use_double_wide_mlp); optional per-layer inputs (PLE)
// add a gated residual after each layer's MLP; an optional MoE block runs
// beside the dense MLP; every layer's output is scaled by its layer_scalar.
#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/attention.h"
#include "model/decoder_model.h"
#include "model/gemma4_moe.h"
#include "model/layers.h"
#include "model/rope.h"

namespace fathom {
namespace {

struct Gemma4Attention {
  Linear q, o;
  Linear k, v;            // unset on KV-shared layers; v also unset when values come from k
  Tensor q_norm, k_norm;  // [head_dim]
  Tensor unit;            // [head_dim] ones: the values' norm has no weight
  int64_t head_dim = 0, kv_heads = 0;
  bool owns_kv = true;
  bool values_from_keys = false;
  std::optional<int64_t> window;
};

// The PLE residual after the MLP: x += norm(proj(gelu_tanh(gate(x)) · input)).
struct PerLayerInputBlock {
  Linear gate, proj;
  Tensor post_norm;
};

struct MoeBlock {
  Gemma4Router router;
  Gemma4Experts experts;
  Tensor post_norm_1, pre_norm_2, post_norm_2;  // dense branch out; experts in and out
};

struct Gemma4Layer {
  Tensor input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;
  Gemma4Attention attn;
  GatedMlp mlp;
  std::optional<MoeBlock> moe;
  std::optional<PerLayerInputBlock> per_layer;
  float layer_scalar = 1.0f;
};

// A scale as transformers applies it: cast to the weights' (compute) dtype.
float in_compute_dtype(double v, bool bf16) {
  return bf16 ? bf16_to_f32(f32_to_bf16(float(v))) : float(v);
}

// The first numel(shape) elements of a flat buffer, viewed as `shape`.
Tensor view(const Tensor& flat, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return flat.slice_rows(0, n).reshape(std::move(shape));
}

Gemma4Attention load_attention(const WeightLoader& w, const std::string& p, const ModelConfig& c, int64_t layer) {
  Gemma4Attention a;
  a.head_dim = c.layer_head_dim[layer];
  a.kv_heads = c.layer_kv_heads[layer];
  a.owns_kv = c.owns_kv(layer);
  const bool sliding = c.layer_types[layer] == LayerKind::sliding_attention;
  a.values_from_keys = c.attention_k_eq_v && !sliding;
  if (sliding) a.window = c.sliding_window;
  const int64_t q_dim = c.num_heads * a.head_dim, kv_dim = a.kv_heads * a.head_dim;
  a.q = Linear::load(w, p + ".q_proj", q_dim, c.hidden_size, c.qkv_bias);
  a.o = Linear::load(w, p + ".o_proj", c.hidden_size, q_dim, c.o_bias);
  a.q_norm = w.vector(p + ".q_norm.weight", a.head_dim);
  if (a.owns_kv) {
    a.k = Linear::load(w, p + ".k_proj", kv_dim, c.hidden_size, c.qkv_bias);
    if (!a.values_from_keys) a.v = Linear::load(w, p + ".v_proj", kv_dim, c.hidden_size, c.qkv_bias);
    a.k_norm = w.vector(p + ".k_norm.weight", a.head_dim);
    a.unit = w.ones(a.head_dim);
  }
  return a;
}

// One chunk's activations, flat and sized for the widest layer; each layer views a prefix.
struct Scratch {
  Tensor x, h, s, s2;      // [t, hidden]: residual stream, normed input, sublayer outputs
  Tensor q, k, v, attn;    // flat: t · heads · head_dim (q, attn) or t · kv_heads · head_dim (k, v)
  Tensor gate, up;         // flat: t · widest MLP intermediate
  Tensor per_layer_inputs; // [t, layers, per-layer dim] when PLE is on
  Tensor ple_gate, ple_in; // [t, per-layer dim]
};

class Gemma4Model final : public DecoderModel {
 public:
  Gemma4Model(ModelConfig config, WeightStore weights, const LoadOptions& options)
      : DecoderModel(std::move(config), std::move(weights), options) {
    const ModelConfig& c = config_;
    require_attention_layers();
    check(!c.attn_logit_softcapping, "gemma4: attn_logit_softcapping (", c.attn_logit_softcapping.value_or(0.0),
          ") is not supported by the attention op yet");
    check(c.hidden_activation == "gelu_pytorch_tanh" || c.hidden_activation == "gelu_tanh",
          "gemma4: hidden_activation \"", c.hidden_activation, "\" is not supported (gelu_pytorch_tanh is)");
    make_rope_tables();

    const WeightLoader w(weights_, dtype_, *backend_, c.quantization ? &*c.quantization : nullptr);
    const std::string root = text_prefix(w);
    embed_ = w.table(root + "embed_tokens.weight", c.vocab_size, c.hidden_size);
    embed_scale_ = in_compute_dtype(std::sqrt(double(c.hidden_size)), bf16());
    const int64_t ple = c.hidden_size_per_layer_input;
    if (ple > 0) {
      embed_per_layer_ = w.table(root + "embed_tokens_per_layer.weight", c.vocab_size_per_layer_input,
                                 c.num_layers * ple);
      embed_per_layer_scale_ = in_compute_dtype(std::sqrt(double(ple)), bf16());
      per_layer_projection_ =
          Linear::load(w, root + "per_layer_model_projection", c.num_layers * ple, c.hidden_size, false);
      per_layer_projection_norm_ = w.vector(root + "per_layer_projection_norm.weight", ple);
    }

    const int64_t first_shared = c.num_layers - c.num_kv_shared_layers;
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = root + "layers." + std::to_string(i);
      Gemma4Layer l;
      l.input_norm = w.vector(p + ".input_layernorm.weight", c.hidden_size);
      l.post_attention_norm = w.vector(p + ".post_attention_layernorm.weight", c.hidden_size);
      l.pre_feedforward_norm = w.vector(p + ".pre_feedforward_layernorm.weight", c.hidden_size);
      l.post_feedforward_norm = w.vector(p + ".post_feedforward_layernorm.weight", c.hidden_size);
      l.attn = load_attention(w, p + ".self_attn", c, i);
      const bool wide = c.use_double_wide_mlp && c.num_kv_shared_layers > 0 && i >= first_shared;
      l.mlp = GatedMlp::load(w, p + ".mlp", c.hidden_size, c.intermediate_size * (wide ? 2 : 1), false);
      if (c.enable_moe_block) {
        MoeBlock m;
        m.router = Gemma4Router::load(w, p + ".router", c);
        m.experts = Gemma4Experts::load(w, p + ".experts", c);
        m.post_norm_1 = w.vector(p + ".post_feedforward_layernorm_1.weight", c.hidden_size);
        m.pre_norm_2 = w.vector(p + ".pre_feedforward_layernorm_2.weight", c.hidden_size);
        m.post_norm_2 = w.vector(p + ".post_feedforward_layernorm_2.weight", c.hidden_size);
        l.moe = std::move(m);
      }
      if (ple > 0) {
        PerLayerInputBlock b;
        b.gate = Linear::load(w, p + ".per_layer_input_gate", ple, c.hidden_size, false);
        b.proj = Linear::load(w, p + ".per_layer_projection", c.hidden_size, ple, false);
        b.post_norm = w.vector(p + ".post_per_layer_input_norm.weight", c.hidden_size);
        l.per_layer = std::move(b);
      }
      if (w.has(p + ".layer_scalar")) l.layer_scalar = w.scalar(p + ".layer_scalar");
      max_q_ = std::max(max_q_, c.num_heads * l.attn.head_dim);
      max_kv_ = std::max(max_kv_, l.attn.kv_heads * l.attn.head_dim);
      max_intermediate_ = std::max(max_intermediate_, l.mlp.intermediate_size());
      layers_.push_back(std::move(l));
    }
    final_norm_ = w.vector(root + "norm.weight", c.hidden_size);
    load_lm_head(w, root);
    count_weight_bytes(w);
  }

  StepOutput forward_step(const StepLayout& layout) const override {
    const ModelConfig& c = config_;
    const int64_t t = layout.rows();
    Backend& b = *backend_;
    Scratch s = scratch(t);

    b.embedding(embed_, layout.ids, s.x);
    b.scale(s.x, embed_scale_);
    if (c.hidden_size_per_layer_input > 0) per_layer_inputs(layout.ids, s);

    RopeTable::Tables rope[2];  // [0] sliding, [1] full attention
    for (int kind = 0; kind < 2; ++kind)
      if (rope_[kind]) rope[kind] = rope_[kind]->tables(b, layout);
    AttentionParams params;
    params.bf16_inputs = bf16();
    params.scale = 1.0f;  // Gemma 4 never scales scores; its q/k norms set their size

    for (int64_t i = 0; i < c.num_layers; ++i) {
      const int kind = c.layer_types[i] == LayerKind::sliding_attention ? 0 : 1;
      run_layer(i, s, rope[kind], params, layout);
    }

    return logits(s.x, layout);
  }

 private:
  // One table per layer type, at that type's head_dim (global layers may be wider).
  void make_rope_tables() {
    const ModelConfig& c = config_;
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const bool sliding = c.layer_types[i] == LayerKind::sliding_attention;
      const int kind = sliding ? 0 : 1;
      const int64_t hd = c.layer_head_dim[i];
      if (rope_[kind]) {
        check(rope_head_dim_[kind] == hd, "gemma4: layers of one type have different head_dims (", rope_head_dim_[kind],
              " and ", hd, " at layer ", i, ")");
        continue;
      }
      const RopeConfig& r = sliding ? c.local_rope.value_or(c.rope) : c.rope;
      rope_[kind].emplace(r, hd, c.max_position_embeddings);
      rope_head_dim_[kind] = hd;
    }
  }

  Scratch scratch(int64_t t) const {
    const ModelConfig& c = config_;
    Backend& b = *backend_;
    Scratch s;
    for (Tensor* x : {&s.x, &s.h, &s.s, &s.s2}) *x = b.empty({t, c.hidden_size}, DType::f32);
    s.q = b.empty({t * max_q_}, DType::f32);
    s.attn = b.empty({t * max_q_}, DType::f32);
    s.k = b.empty({t * max_kv_}, DType::f32);
    s.v = b.empty({t * max_kv_}, DType::f32);
    s.gate = b.empty({t * max_intermediate_}, DType::f32);
    s.up = b.empty({t * max_intermediate_}, DType::f32);
    if (const int64_t ple = c.hidden_size_per_layer_input; ple > 0) {
      s.per_layer_inputs = b.empty({t, c.num_layers, ple}, DType::f32);
      s.ple_gate = b.empty({t, ple}, DType::f32);
      s.ple_in = b.empty({t, ple}, DType::f32);
    }
    return s;
  }

  // s.per_layer_inputs [t, layers, ple] ← (norm(proj(x) · hidden^-0.5) + table[ids] · √ple) · 2^-0.5.
  void per_layer_inputs(const std::vector<int32_t>& ids, Scratch& s) const {
    const ModelConfig& c = config_;
    Backend& b = *backend_;
    const int64_t t = int64_t(ids.size()), ple = c.hidden_size_per_layer_input;
    Tensor& out = s.per_layer_inputs;
    Tensor flat = out.reshape({t, c.num_layers * ple});
    per_layer_projection_(b, s.x, flat, bf16());
    b.scale(flat, float(std::pow(double(c.hidden_size), -0.5)));
    Tensor rows = out.reshape({t * c.num_layers, ple});
    b.rms_norm(rows, per_layer_projection_norm_, float(c.rms_norm_eps), rows);
    Tensor token = b.empty({t, c.num_layers * ple}, DType::f32);
    b.embedding(embed_per_layer_, ids, token);
    b.scale(token, embed_per_layer_scale_);
    b.add_inplace(flat, token);
    b.scale(flat, float(std::pow(2.0, -0.5)));
  }

  void run_layer(int64_t i, Scratch& s, const RopeTable::Tables& rope, const AttentionParams& params,
                 const StepLayout& layout) const {
    const ModelConfig& c = config_;
    const Gemma4Layer& l = layers_[i];
    Backend& b = *backend_;
    const float eps = float(c.rms_norm_eps);
    const int64_t t = s.x.dim(0);

    b.rms_norm(s.x, l.input_norm, eps, s.h);
    attention(l.attn, s, rope, params, layout, c.kv_source_layer[i]);
    b.rms_norm(s.s, l.post_attention_norm, eps, s.s);
    b.add_inplace(s.x, s.s);

    b.rms_norm(s.x, l.pre_feedforward_norm, eps, s.h);
    const int64_t inter = l.mlp.intermediate_size();
    Tensor gate = view(s.gate, {t, inter}), up = view(s.up, {t, inter});
    l.mlp(b, s.h, gate, up, s.s, GateActivation::gelu_tanh, bf16());
    if (l.moe) {
      // The experts see the residual stream (not the MLP's normed input).
      b.rms_norm(s.s, l.moe->post_norm_1, eps, s.s);
      const Gemma4Routing routing = l.moe->router.route(b, s.x);
      b.rms_norm(s.x, l.moe->pre_norm_2, eps, s.h);
      l.moe->experts(b, s.h, routing, s.s2, bf16());
      b.rms_norm(s.s2, l.moe->post_norm_2, eps, s.s2);
      b.add_inplace(s.s, s.s2);
    }
    b.rms_norm(s.s, l.post_feedforward_norm, eps, s.s);
    b.add_inplace(s.x, s.s);

    if (l.per_layer) {
      const int64_t ple = c.hidden_size_per_layer_input;
      // This layer's slice of [t, layers, ple].
      b.copy_columns(s.per_layer_inputs.reshape({t, c.num_layers * ple}), i * ple, s.ple_in, 0, ple);
      l.per_layer->gate(b, s.x, s.ple_gate, bf16());
      b.gelu_tanh_mul(s.ple_gate, s.ple_in, s.ple_gate);
      l.per_layer->proj(b, s.ple_gate, s.s, bf16());
      b.rms_norm(s.s, l.per_layer->post_norm, eps, s.s);
      b.add_inplace(s.x, s.s);
    }
    b.scale(s.x, l.layer_scalar);
  }

  // s.s ← o(attention(rope(norm(q(h))), keys, values)); a layer that owns its
  // cache first appends rope(norm(k(h))) and the scale-less norm of v(h) (or of
  // k(h) itself, before its norm, on k_eq_v layers).
  void attention(const Gemma4Attention& a, Scratch& s, const RopeTable::Tables& rope, AttentionParams params,
                 const StepLayout& layout, int64_t kv_layer) const {
    const ModelConfig& c = config_;
    Backend& b = *backend_;
    const float eps = float(c.rms_norm_eps);
    const int64_t t = s.h.dim(0), hd = a.head_dim, q_dim = c.num_heads * hd, kv_dim = a.kv_heads * hd;
    Tensor q = view(s.q, {t, c.num_heads, hd}), q2 = q.reshape({t, q_dim});
    if (a.owns_kv) {
      Tensor k = view(s.k, {t, a.kv_heads, hd}), k2 = k.reshape({t, kv_dim});
      Tensor v = view(s.v, {t, a.kv_heads, hd}), v2 = v.reshape({t, kv_dim});
      const Backend::MatmulTarget qkv[] = {{&a.q.weight, a.q.bias ? &*a.q.bias : nullptr, &q2},
                                           {&a.k.weight, a.k.bias ? &*a.k.bias : nullptr, &k2},
                                           {&a.v.weight, a.v.bias ? &*a.v.bias : nullptr, &v2}};
      b.matmul_shared(s.h, std::span<const Backend::MatmulTarget>(qkv, a.values_from_keys ? 2 : 3), bf16());
      if (a.values_from_keys) b.copy(k, v);
      Tensor kh = k.reshape({t * a.kv_heads, hd}), vh = v.reshape({t * a.kv_heads, hd});
      b.rms_norm(kh, a.k_norm, eps, kh);
      b.rms_norm(vh, a.unit, eps, vh);
      b.rope(k, rope.cos, rope.sin);
    } else {
      a.q(b, s.h, q2, bf16());
    }
    Tensor qh = q.reshape({t * c.num_heads, hd});
    b.rms_norm(qh, a.q_norm, eps, qh);
    b.rope(q, rope.cos, rope.sin);
    params.window = a.window;
    Tensor attn = view(s.attn, {t, c.num_heads, hd});
    // A layer that owns its cache appends its rows first; a shared one reads its source's.
    Tensor k = view(s.k, {t, a.kv_heads, hd}), v = view(s.v, {t, a.kv_heads, hd});
    attend_segments(b, layout, kv_layer, a.owns_kv ? &k : nullptr, a.owns_kv ? &v : nullptr, q, params, attn);
    a.o(b, attn.reshape({t, q_dim}), s.s, bf16());
  }

  std::optional<RopeTable> rope_[2];  // sliding, full attention
  int64_t rope_head_dim_[2] = {0, 0};
  float embed_scale_ = 1.0f, embed_per_layer_scale_ = 1.0f;
  Tensor embed_per_layer_, per_layer_projection_norm_;
  Linear per_layer_projection_;
  std::vector<Gemma4Layer> layers_;
  int64_t max_q_ = 0, max_kv_ = 0, max_intermediate_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_gemma4(ModelConfig config, WeightStore weights, const LoadOptions& options) {
  return std::make_unique<Gemma4Model>(std::move(config), std::move(weights), options);
}

}  // namespace fathom

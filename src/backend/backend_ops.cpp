// Argument checks of the memory, row-movement, routing, Gated DeltaNet and KV
// ops (backend.cpp has the matmul, norm and attention ones). Every check names
// the op and the shapes it got.
#include "backend/backend.h"

#include <cmath>

#include "backend/op_checks.h"
#include "core/error.h"

namespace fathom {

using op_checks::expect_f32;
using op_checks::expect_rank;

Tensor Backend::empty(std::vector<int64_t> shape, DType dtype) { return empty_impl(std::move(shape), dtype); }

Tensor Backend::reserve(std::vector<int64_t> shape, DType dtype) { return reserve_impl(std::move(shape), dtype); }

Tensor Backend::upload(const Tensor& host) {
  check(host.device() == Device::cpu, "upload: the source is on ", device_name(host.device()), ", not the host");
  return upload_impl(host);
}

Tensor Backend::download(const Tensor& t) {
  check(t.device() == device(), "download: the tensor is on ", device_name(t.device()), ", this backend on ",
        device_name(device()));
  return download_impl(t);
}

void Backend::copy(const Tensor& src, Tensor& dst) {
  const OpScope scope(profile_, "copy");
  check(src.dtype() == dst.dtype() && src.numel() == dst.numel(), "copy: ", dtype_name(src.dtype()), " ",
        src.shape_string(), " into ", dtype_name(dst.dtype()), " ", dst.shape_string());
  check(src.device() == device() && dst.device() == device(), "copy: both tensors must be on ",
        device_name(device()));
  copy_impl(src, dst);
}

void Backend::fill(Tensor& x, float value) {
  const OpScope scope(profile_, "fill");
  expect_f32(x, "fill", "x");
  fill_impl(x, value);
}

namespace {
// k, v [count, kv_heads, head_dim] f32 for rows [row, row + count) of the view.
void check_kv_rows(const KvView& kv, int64_t row, const Tensor& k, const Tensor& v, const char* op) {
  const KvFormat& f = kv.format;
  expect_f32(k, op, "k");
  expect_f32(v, op, "v");
  check(k.rank() == 3 && k.shape() == v.shape() && k.dim(1) == f.kv_heads && k.dim(2) == f.head_dim, op, ": k ",
        k.shape_string(), " v ", v.shape_string(), " do not fit ", f.kv_heads, " heads of ", f.head_dim);
  check(row >= 0 && row + k.dim(0) <= kv.length, op, ": rows [", row, ", ", row + k.dim(0), ") outside the view's ",
        kv.length);
}
}  // namespace

void Backend::kv_write(const KvView& kv, int64_t row, const Tensor& k, const Tensor& v) {
  check_kv_rows(kv, row, k, v, "kv_write");
  const KvSegment whole{kv, 0, k.dim(0), kv.first_position + row};
  kv_write(std::span(&whole, 1), k, v);
}

namespace {
// The segments of a step's rows of k and v, in order, each fitting its view.
void check_kv_segments(std::span<const KvSegment> segments, const Tensor& k, const Tensor& v, const char* op) {
  check(k.rank() == 3 && k.shape() == v.shape(), op, ": k ", k.shape_string(), " v ", v.shape_string());
  int64_t next_row = 0;
  for (const KvSegment& s : segments) {
    check(s.row == next_row && s.rows >= 0 && s.row + s.rows <= k.dim(0), op, ": a segment of rows [", s.row, ", ",
          s.row + s.rows, ") where row ", next_row, " was due, of k ", k.shape_string());
    check_kv_rows(s.kv, s.first_position - s.kv.first_position, k.slice_rows(s.row, s.row + s.rows),
                  v.slice_rows(s.row, s.row + s.rows), op);
    next_row += s.rows;
  }
  check(next_row == k.dim(0), op, ": segments cover ", next_row, " rows of k ", k.shape_string());
}
}  // namespace

void Backend::kv_write(std::span<const KvSegment> segments, const Tensor& k, const Tensor& v) {
  const OpScope scope(profile_, "kv_write");
  check_kv_segments(segments, k, v, "kv_write");
  kv_write_impl(segments, k, v);
}

void Backend::rope_kv_write(std::span<const KvSegment> segments, Tensor& q, Tensor& k, const Tensor& v,
                            const QkNorms& norms, const Tensor& cos, const Tensor& sin) {
  const OpScope scope(profile_, "rope_kv_write");
  check((norms.q == nullptr) == (norms.k == nullptr), "rope_kv_write: norms for both q and k, or for neither");
  if (norms.q) {
    op_checks::check_norm_rope("rope_kv_write", q, *norms.q, cos, sin);
    op_checks::check_norm_rope("rope_kv_write", k, *norms.k, cos, sin);
  } else {
    op_checks::check_rope("rope_kv_write", q, cos, sin);
    op_checks::check_rope("rope_kv_write", k, cos, sin);
  }
  op_checks::check_qk("rope_kv_write", q, k);
  check_kv_segments(segments, k, v, "rope_kv_write");
  rope_kv_write_impl(segments, q, k, v, norms, cos, sin);
}

void Backend::kv_read(const KvView& kv, int64_t row, Tensor& k, Tensor& v) {
  const OpScope scope(profile_, "kv_read");
  check_kv_rows(kv, row, k, v, "kv_read");
  kv_read_impl(kv, row, k, v);
}

void Backend::scale(Tensor& x, float s) {
  const OpScope scope(profile_, "scale");
  expect_f32(x, "scale", "x");
  scale_impl(x, s);
}

void Backend::soft_cap(Tensor& x, float cap) {
  const OpScope scope(profile_, "soft_cap");
  expect_f32(x, "soft_cap", "x");
  check(cap > 0.0f, "soft_cap: the cap must be positive, got ", cap);
  soft_cap_impl(x, cap);
}

void Backend::mul_columns(Tensor& x, const Tensor& w) {
  const OpScope scope(profile_, "mul_columns");
  expect_f32(x, "mul_columns", "x");
  expect_f32(w, "mul_columns", "w");
  check(x.rank() >= 1 && w.numel() == x.dim(-1), "mul_columns: w ", w.shape_string(), " for x ", x.shape_string());
  mul_columns_impl(x, w);
}

void Backend::sigmoid_mul(Tensor& x, const Tensor& gate) {
  const OpScope scope(profile_, "sigmoid_mul");
  expect_f32(x, "sigmoid_mul", "x");
  expect_f32(gate, "sigmoid_mul", "gate");
  const bool per_row = x.rank() >= 1 && gate.numel() == x.dim(0) && gate.numel() != x.numel();
  check(gate.numel() == x.numel() || per_row, "sigmoid_mul: gate ", gate.shape_string(), " for x ",
        x.shape_string());
  sigmoid_mul_impl(x, gate);
}

void Backend::copy_columns(const Tensor& src, int64_t src_col, Tensor& dst, int64_t dst_col, int64_t width) {
  const OpScope scope(profile_, "copy_columns");
  expect_f32(src, "copy_columns", "src");
  expect_f32(dst, "copy_columns", "dst");
  expect_rank(src, 2, "copy_columns", "src");
  expect_rank(dst, 2, "copy_columns", "dst");
  check(src.dim(0) == dst.dim(0) && width >= 0 && src_col >= 0 && dst_col >= 0 && src_col + width <= src.dim(1) &&
            dst_col + width <= dst.dim(1),
        "copy_columns: ", width, " columns from ", src_col, " of ", src.shape_string(), " to ", dst_col, " of ",
        dst.shape_string());
  copy_columns_impl(src, src_col, dst, dst_col, width);
}

void Backend::gather_rows(const Tensor& src, const std::vector<int32_t>& rows, Tensor& dst) {
  const OpScope scope(profile_, "gather_rows");
  expect_f32(src, "gather_rows", "src");
  expect_f32(dst, "gather_rows", "dst");
  expect_rank(src, 2, "gather_rows", "src");
  expect_rank(dst, 2, "gather_rows", "dst");
  check(dst.dim(0) == int64_t(rows.size()) && dst.dim(1) == src.dim(1), "gather_rows: ", rows.size(),
        " rows of ", src.shape_string(), " into ", dst.shape_string());
  for (int32_t r : rows) check(r >= 0 && r < src.dim(0), "gather_rows: row ", r, " outside [0, ", src.dim(0), ")");
  gather_rows_impl(src, rows, dst);
}

void Backend::scatter_add_rows(const Tensor& src, const std::vector<int32_t>& rows, const std::vector<float>& weights,
                               Tensor& dst) {
  const OpScope scope(profile_, "scatter_add_rows");
  expect_f32(src, "scatter_add_rows", "src");
  expect_f32(dst, "scatter_add_rows", "dst");
  expect_rank(src, 2, "scatter_add_rows", "src");
  expect_rank(dst, 2, "scatter_add_rows", "dst");
  check(src.dim(0) == int64_t(rows.size()) && rows.size() == weights.size() && dst.dim(1) == src.dim(1),
        "scatter_add_rows: src ", src.shape_string(), ", ", rows.size(), " rows, ", weights.size(), " weights, dst ",
        dst.shape_string());
  for (int32_t r : rows)
    check(r >= 0 && r < dst.dim(0), "scatter_add_rows: row ", r, " outside [0, ", dst.dim(0), ")");
  scatter_add_rows_impl(src, rows, weights, dst);
}

void Backend::pick_rows(const Tensor& x, std::span<const PickRule> rules, Tensor& ids) {
  const OpScope scope(profile_, "pick_rows");
  expect_f32(x, "pick_rows", "x");
  expect_rank(x, 2, "pick_rows", "x");
  check(x.dim(1) >= 1, "pick_rows: rows of ", x.dim(1), " values have nothing to pick");
  check(ids.dtype() == DType::i32 && ids.rank() == 1 && ids.dim(0) == x.dim(0), "pick_rows: ids ",
        dtype_name(ids.dtype()), " ", ids.shape_string(), " should be i32 [", x.dim(0), "]");
  check(int64_t(rules.size()) == x.dim(0), "pick_rows: ", rules.size(), " rules for ", x.dim(0), " rows");
  for (const PickRule& r : rules)
    check(std::isfinite(r.temperature) && r.temperature >= 0.0f && r.min_p >= 0.0f && r.min_p <= 1.0f &&
              r.uniform >= 0.0 && r.uniform < 1.0,
          "pick_rows: a rule of temperature ", r.temperature, ", min_p ", r.min_p, ", uniform ", r.uniform,
          " (temperature >= 0, min_p in [0, 1], uniform in [0, 1))");
  for (const PickRule& r : rules)
    check(r.top_k >= 0 && r.top_p > 0.0f && r.top_p <= 1.0f, "pick_rows: a rule of top_k ", r.top_k, ", top_p ",
          r.top_p, " (top_k >= 0, top_p in (0, 1])");
  pick_rows_impl(x, rules, ids);
}

void Backend::route_top_k(const Tensor& logits, int64_t k, bool renormalize, const Tensor* expert_scale, Tensor& ids,
                          Tensor& weights) {
  const OpScope scope(profile_, "route_top_k");
  expect_f32(logits, "route_top_k", "logits");
  expect_rank(logits, 2, "route_top_k", "logits");
  const int64_t t = logits.dim(0), e = logits.dim(1);
  check(k >= 1 && k <= e, "route_top_k: top_k ", k, " outside [1, ", e, "]");
  check(ids.dtype() == DType::i32 && ids.rank() == 2 && ids.dim(0) == t && ids.dim(1) == k, "route_top_k: ids ",
        dtype_name(ids.dtype()), " ", ids.shape_string(), " should be i32 [", t, ", ", k, "]");
  expect_f32(weights, "route_top_k", "weights");
  check(weights.shape() == ids.shape(), "route_top_k: weights ", weights.shape_string(), " should be ",
        ids.shape_string());
  if (expert_scale) {
    expect_f32(*expert_scale, "route_top_k", "expert_scale");
    check(expert_scale->numel() == e, "route_top_k: ", expert_scale->numel(), " expert scales for ", e, " experts");
  }
  route_top_k_impl(logits, k, renormalize, expert_scale, ids, weights);
}

void Backend::expert_mlps(const ExpertBank& bank, const Tensor& x, const Tensor& ids, const Tensor& weights,
                          Tensor& y, bool bf16_inputs) {
  const OpScope scope(profile_, "expert_mlps");
  expect_f32(x, "expert_mlps", "x");
  expect_f32(y, "expert_mlps", "y");
  expect_f32(weights, "expert_mlps", "weights");
  expect_rank(x, 2, "expert_mlps", "x");
  const int64_t t = x.dim(0), hidden = x.dim(1), e = bank.count();
  check(e > 0 && int64_t(bank.up.size()) == e && int64_t(bank.down.size()) == e, "expert_mlps: ", bank.gate.size(),
        " gate, ", bank.up.size(), " up and ", bank.down.size(), " down matrices");
  const int64_t inter = bank.gate[0].dim(0);
  for (int64_t i = 0; i < e; ++i) {
    const Tensor &g = bank.gate[size_t(i)], &u = bank.up[size_t(i)], &d = bank.down[size_t(i)];
    check(g.rank() == 2 && u.shape() == g.shape() && g.dim(0) == inter && g.dim(1) == hidden && d.rank() == 2 &&
              d.dim(0) == hidden && d.dim(1) == inter,
          "expert_mlps: expert ", i, " has gate ", g.shape_string(), ", up ", u.shape_string(), ", down ",
          d.shape_string(), " for x ", x.shape_string());
  }
  check(ids.dtype() == DType::i32 && ids.rank() == 2 && ids.dim(0) == t && ids.dim(1) >= 1, "expert_mlps: ids ",
        dtype_name(ids.dtype()), " ", ids.shape_string(), " should be i32 [", t, ", k]");
  check(weights.shape() == ids.shape(), "expert_mlps: weights ", weights.shape_string(), " should be ",
        ids.shape_string());
  check(y.shape() == x.shape(), "expert_mlps: y ", y.shape_string(), " should be ", x.shape_string());
  if (t == 0) return;
  expert_mlps_impl(bank, x, ids, weights, y, bf16_inputs);
}

void Backend::causal_conv1d_silu(const Tensor& x, const Tensor& weight, Tensor& state, Tensor& out) {
  const OpScope scope(profile_, "causal_conv1d_silu");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &weight, &state, &out}) expect_f32(*t, "causal_conv1d_silu", "every tensor");
  expect_rank(x, 2, "causal_conv1d_silu", "x");
  expect_rank(weight, 2, "causal_conv1d_silu", "weight");
  const int64_t channels = x.dim(1), kernel = weight.dim(1);
  check(weight.dim(0) == channels && kernel >= 1 && state.rank() == 2 && state.dim(0) == channels &&
            state.dim(1) == kernel - 1 && out.shape() == x.shape(),
        "causal_conv1d_silu: x ", x.shape_string(), ", weight ", weight.shape_string(), ", state ",
        state.shape_string(), ", out ", out.shape_string(), " disagree");
  check(out.raw() != x.raw() || x.numel() == 0, "causal_conv1d_silu: out may not alias x");
  causal_conv1d_silu_impl(x, weight, state, out);
}

void Backend::l2_norm_heads(Tensor& x, int64_t first_col, int64_t heads, int64_t head_dim, float scale, float eps) {
  const OpScope scope(profile_, "l2_norm_heads");
  expect_f32(x, "l2_norm_heads", "x");
  expect_rank(x, 2, "l2_norm_heads", "x");
  check(first_col >= 0 && heads >= 0 && head_dim > 0 && first_col + heads * head_dim <= x.dim(1), "l2_norm_heads: ",
        heads, " heads of ", head_dim, " from column ", first_col, " of ", x.shape_string());
  l2_norm_heads_impl(x, first_col, heads, head_dim, scale, eps);
}

void Backend::delta_rule_gates(Tensor& b, Tensor& a, const Tensor& neg_a, const Tensor& dt_bias) {
  const OpScope scope(profile_, "delta_rule_gates");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&b, &a, &neg_a, &dt_bias}) expect_f32(*t, "delta_rule_gates", "every tensor");
  expect_rank(b, 2, "delta_rule_gates", "b");
  check(a.shape() == b.shape() && neg_a.numel() == b.dim(1) && dt_bias.numel() == b.dim(1), "delta_rule_gates: b ",
        b.shape_string(), ", a ", a.shape_string(), ", neg_a ", neg_a.shape_string(), ", dt_bias ",
        dt_bias.shape_string(), " disagree");
  delta_rule_gates_impl(b, a, neg_a, dt_bias);
}

void Backend::gated_delta_rule(const DeltaRuleShape& shape, const Tensor& qkv, const Tensor& g, const Tensor& beta,
                               int64_t chunk, Tensor& state, Tensor& out, Tensor* history, int64_t history_row) {
  const OpScope scope(profile_, "gated_delta_rule");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&qkv, &g, &beta, &state, &out}) expect_f32(*t, "gated_delta_rule", "every tensor");
  const DeltaRuleShape& d = shape;
  check(d.key_heads > 0 && d.value_heads % d.key_heads == 0 && d.key_head_dim > 0 && d.value_head_dim > 0,
        "gated_delta_rule: ", d.value_heads, " value heads over ", d.key_heads, " key heads");
  expect_rank(qkv, 2, "gated_delta_rule", "qkv");
  const int64_t t = qkv.dim(0);
  check(qkv.dim(1) == 2 * d.key_dim() + d.value_dim(), "gated_delta_rule: qkv ", qkv.shape_string(), " should have ",
        2 * d.key_dim() + d.value_dim(), " columns");
  check(g.rank() == 2 && g.dim(0) == t && g.dim(1) == d.value_heads && beta.shape() == g.shape(),
        "gated_delta_rule: g ", g.shape_string(), " beta ", beta.shape_string(), " for ", t, " tokens of ",
        d.value_heads, " heads");
  check(state.numel() == d.value_heads * d.key_head_dim * d.value_head_dim && out.numel() == t * d.value_dim(),
        "gated_delta_rule: state ", state.shape_string(), " out ", out.shape_string(), " disagree with the shape");
  check(chunk >= 0, "gated_delta_rule: chunk size ", chunk, " is negative");
  if (history) {
    check(chunk == 0, "gated_delta_rule: a per-token history needs a token-by-token run (chunk 0), got chunk ", chunk);
    expect_f32(*history, "gated_delta_rule", "history");
    check(history->rank() >= 1 && history->numel() == history->dim(0) * state.numel() && history_row >= 0,
          "gated_delta_rule: history ", history->shape_string(), " does not hold states ", state.shape_string());
  }
  gated_delta_rule_impl(shape, qkv, g, beta, chunk, state, out, history, history_row);
}

void Backend::gated_rms_norm(Tensor& x, const Tensor& z, const Tensor& w, float eps) {
  const OpScope scope(profile_, "gated_rms_norm");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &z, &w}) expect_f32(*t, "gated_rms_norm", "every tensor");
  check(x.rank() == 2 && z.shape() == x.shape() && w.numel() == x.dim(1), "gated_rms_norm: x ", x.shape_string(),
        ", z ", z.shape_string(), ", w ", w.shape_string(), " disagree");
  gated_rms_norm_impl(x, z, w, eps);
}

}  // namespace fathom

#include "backend/backend.h"

#include "backend/op_checks.h"
#include "core/error.h"
#ifdef FATHOM_WITH_CUDA
#include "backend/cuda/cuda_factory.h"
#endif

namespace fathom {
using op_checks::check_norm_rope;
using op_checks::check_rope;
using op_checks::expect_f32;

namespace {
void check_matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y);
}  // namespace

void Backend::matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool bf16_inputs) {
  const OpScope scope(profile_, "matmul");
  check_matmul(x, w, bias, y);
  matmul_impl(x, w, bias, y, bf16_inputs);
}

void Backend::matmul_shared(const Tensor& x, std::span<const MatmulTarget> targets, bool bf16_inputs) {
  const OpScope scope(profile_, "matmul");
  check(!targets.empty(), "matmul_shared: no targets");
  for (const auto& t : targets) {
    check(t.w && t.y, "matmul_shared: a target lacks its weight or output");
    check_matmul(x, *t.w, t.bias, *t.y);
  }
  matmul_shared_impl(x, targets, bf16_inputs);
}

namespace {
void check_matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  expect_f32(x, "matmul", "x");
  expect_f32(y, "matmul", "y");
  check(w.dtype() == DType::f32 || w.dtype() == DType::bf16 || w.dtype() == DType::affine, "matmul: weight dtype ",
        dtype_name(w.dtype()), " is not supported (f32, bf16, affine)");
  check(x.rank() == 2 && w.rank() == 2 && y.rank() == 2, "matmul: expected 2-D x, w, y; got ", x.shape_string(),
        " ", w.shape_string(), " ", y.shape_string());
  check(x.dim(1) == w.dim(1), "matmul: x ", x.shape_string(), " and w ", w.shape_string(), " disagree on K");
  check(y.dim(0) == x.dim(0) && y.dim(1) == w.dim(0), "matmul: y ", y.shape_string(), " should be [",
        x.dim(0), ", ", w.dim(0), "]");
  if (bias) {
    expect_f32(*bias, "matmul", "bias");
    check(bias->numel() == w.dim(0), "matmul: bias has ", bias->numel(), " elements for N=", w.dim(0));
  }
}
}  // namespace

void Backend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
  const OpScope scope(profile_, "rms_norm");
  expect_f32(x, "rms_norm", "x");
  expect_f32(w, "rms_norm", "weight");
  expect_f32(y, "rms_norm", "y");
  check(x.numel() == y.numel() && x.numel() % w.numel() == 0 && x.dim(-1) == w.numel(),
        "rms_norm: x ", x.shape_string(), ", weight ", w.shape_string(), ", y ", y.shape_string(), " disagree");
  rms_norm_impl(x, w, eps, y);
}

void Backend::rope(Tensor& x, const Tensor& cos, const Tensor& sin) {
  const OpScope scope(profile_, "rope");
  check_rope("rope", x, cos, sin);
  rope_impl(x, cos, sin);
}

void Backend::add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) {
  const OpScope scope(profile_, "add_rms_norm");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &y, &w, &out})
    expect_f32(*t, "add_rms_norm", "every tensor");
  check(x.rank() >= 1 && w.rank() == 1 && x.dim(-1) == w.numel(), "add_rms_norm: x ", x.shape_string(),
        " and weight ", w.shape_string(), " disagree");
  check(y.numel() == x.numel() && out.numel() == x.numel(), "add_rms_norm: x ", x.shape_string(), ", y ",
        y.shape_string(), " and out ", out.shape_string(), " disagree");
  add_rms_norm_impl(x, y, w, eps, out);
}

void Backend::rms_norm_rope(Tensor& x, const Tensor& w, float eps, const Tensor& cos, const Tensor& sin) {
  const OpScope scope(profile_, "rms_norm_rope");
  check_norm_rope("rms_norm_rope", x, w, cos, sin);
  rms_norm_rope_impl(x, w, eps, cos, sin);
}

void Backend::silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  const OpScope scope(profile_, "silu_mul");
  for (const Tensor* t : {&gate, &up}) expect_f32(*t, "silu_mul", "inputs");
  expect_f32(out, "silu_mul", "out");
  check(gate.shape() == up.shape() && gate.numel() == out.numel(), "silu_mul: shapes ", gate.shape_string(), " ",
        up.shape_string(), " ", out.shape_string(), " disagree");
  silu_mul_impl(gate, up, out);
}

void Backend::gelu_tanh_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  const OpScope scope(profile_, "gelu_tanh_mul");
  for (const Tensor* t : {&gate, &up}) expect_f32(*t, "gelu_tanh_mul", "inputs");
  expect_f32(out, "gelu_tanh_mul", "out");
  check(gate.shape() == up.shape() && gate.numel() == out.numel(), "gelu_tanh_mul: shapes ", gate.shape_string(),
        " ", up.shape_string(), " ", out.shape_string(), " disagree");
  gelu_tanh_mul_impl(gate, up, out);
}

void Backend::add_inplace(Tensor& x, const Tensor& y) {
  const OpScope scope(profile_, "add_inplace");
  expect_f32(x, "add", "x");
  expect_f32(y, "add", "y");
  check(x.numel() == y.numel(), "add: shapes ", x.shape_string(), " and ", y.shape_string(), " disagree");
  add_inplace_impl(x, y);
}

void Backend::embedding(const Tensor& table, const std::vector<int32_t>& ids, Tensor& out) {
  const OpScope scope(profile_, "embedding");
  expect_f32(out, "embedding", "out");
  check(table.rank() == 2 && out.rank() == 2 && out.dim(0) == int64_t(ids.size()) && out.dim(1) == table.dim(1),
        "embedding: table ", table.shape_string(), ", ", ids.size(), " ids, out ", out.shape_string());
  for (int32_t id : ids)
    check(id >= 0 && id < table.dim(0), "embedding: token id ", id, " is out of range [0, ", table.dim(0), ")");
  embedding_impl(table, ids, out);
}

namespace {
// A segment's queries at [first, first + rows) over its view.
void check_attention_segment(const KvView& kv, int64_t first, int64_t rows, const AttentionParams& p) {
  check(kv.length == 0 || (kv.blocks && kv.format.block_rows > 0), "attention: ", kv.length, " rows but no blocks");
  check(first >= 0 && first + rows <= kv.end_position(), "attention: queries at [", first, ", ", first + rows,
        ") but the cache holds positions [", kv.first_position, ", ", kv.end_position(), ")");
  // Every query must still see all the keys it is owed: a dropped position is
  // only allowed outside its window.
  check(kv.first_position == 0 || (p.window && first - *p.window + 1 >= kv.first_position),
        "attention: the cache dropped positions below ", kv.first_position, " that the query at ", first,
        " still needs");
  check(kv.format.codec != KvFormat::Codec::plain || kv.format.dtype == DType::f32 || kv.format.dtype == DType::bf16,
        "attention: KV dtype ", dtype_name(kv.format.dtype), " is not supported");
}
}  // namespace

void Backend::attention(const Tensor& q, const KvView& kv, const AttentionParams& p, Tensor& out) {
  const KvSegment whole{kv, 0, q.rank() > 0 ? q.dim(0) : 0, p.first_position};
  attention(q, std::span(&whole, 1), p, out);
}

void Backend::attention(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p, Tensor& out) {
  const OpScope scope(profile_, "attention");
  expect_f32(q, "attention", "q");
  check(q.rank() == 3 && q.shape() == out.shape(), "attention: q ", q.shape_string(), " out ", out.shape_string());
  int64_t next_row = 0;
  for (const KvSegment& s : segments) {
    check(s.row == next_row && s.rows >= 0, "attention: a segment of rows [", s.row, ", ", s.row + s.rows,
          ") where row ", next_row, " was due");
    check(q.dim(2) == s.kv.head_dim() && q.dim(1) % s.kv.kv_heads() == 0, "attention: q ", q.shape_string(),
          " does not fit ", s.kv.kv_heads(), " kv heads of dim ", s.kv.head_dim());
    check_attention_segment(s.kv, s.first_position, s.rows, p);
    next_row += s.rows;
  }
  check(next_row == q.dim(0), "attention: segments cover ", next_row, " rows of q ", q.shape_string());
  attention_impl(q, segments, p, out);
}

void Backend::attend_each_segment(const Tensor& q, std::span<const KvSegment> segments, const AttentionParams& p,
                                  Tensor& out, const ViewAttention& attend) {
  for (const KvSegment& s : segments) {
    AttentionParams at = p;
    at.first_position = s.first_position;
    Tensor rows = out.slice_rows(s.row, s.row + s.rows);
    attend(q.slice_rows(s.row, s.row + s.rows), s.kv, at, rows);
  }
}

}  // namespace fathom

namespace fathom {

DeviceSpec parse_device(const std::string& device) {
  if (device == "cpu") return {Device::cpu, 0};
  if (device == "cuda") return {Device::cuda, 0};
  if (device.rfind("cuda:", 0) == 0) {
    const std::string digits = device.substr(5);
    check(!digits.empty() && digits.size() < 4 && digits.find_first_not_of("0123456789") == std::string::npos,
          "--device ", device, ": the device index must be a number (cuda:0, cuda:1, ...)");
    return {Device::cuda, std::stoi(digits)};
  }
  fail("--device: unknown device \"", device, "\" (cpu, cuda or cuda:N)");
}

std::shared_ptr<Backend> make_backend(const std::string& device) {
  const DeviceSpec spec = parse_device(device);
  if (spec.kind == Device::cpu) return make_cpu_backend();
#ifdef FATHOM_WITH_CUDA
  return make_cuda_backend(spec.index);
#else
  fail("--device ", device, ": this build of fathom has no CUDA backend (it was built without nvcc)");
#endif
}

int64_t gpu_free_bytes(const std::string& device) {
  const DeviceSpec spec = parse_device(device);
  check(spec.kind == Device::cuda, "--device ", device, " is not a GPU");
#ifdef FATHOM_WITH_CUDA
  return cuda_free_bytes(spec.index);
#else
  fail("--device ", device, ": this build of fathom has no CUDA backend (it was built without nvcc)");
#endif
}

}  // namespace fathom

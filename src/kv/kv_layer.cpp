// Building a layer from its spec, and the delayed quantization start: a layer
// keeps plain rows until it holds `start` tokens, then converts them all to
// its codec at the end of the step that reaches the start.
#include "kv/kv_layer.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kv/kv_layout.h"
#include "kv/paged_kv_layer.h"

namespace fathom {
namespace {

std::unique_ptr<PagedKvLayer> make_paged(const std::shared_ptr<KvBlockPool>& pool, const KvLayerSpec& spec,
                                         const KvFormat& format) {
  return std::make_unique<PagedKvLayer>(pool, format, spec.capacity, spec.window, spec.step, spec.rotation_seed);
}

class DelayedCodecKvLayer final : public KvLayer {
 public:
  DelayedCodecKvLayer(std::shared_ptr<KvBlockPool> pool, const KvLayerSpec& spec)
      : pool_(std::move(pool)), spec_(spec), plain_(make_paged(pool_, spec, spec.plain)) {}

  int64_t length() const override { return layer().length(); }
  int64_t first_position() const override { return layer().first_position(); }
  int64_t capacity() const override { return spec_.capacity; }
  void claim(int64_t count) override { layer().claim(count); }
  void append(const Tensor& k, const Tensor& v) override { layer().append(k, v); }
  void trim(int64_t new_length) override { layer().trim(new_length); }
  int64_t bytes() const override { return layer().bytes(); }
  KvView view() const override { return layer().view(); }
  int64_t conversion_at() const override { return plain_ ? std::max<int64_t>(spec_.start, 1) : INT64_MAX; }
  std::unique_ptr<KvLayer> fork(int64_t capacity) const override {
    KvLayerSpec spec = spec_;
    spec.capacity = capacity;
    auto copy = std::make_unique<DelayedCodecKvLayer>(pool_, spec);
    if (plain_) {
      copy->plain_ = plain_->fork_paged(capacity);
    } else {
      copy->plain_.reset();
      copy->coded_ = coded_->fork_paged(capacity);
    }
    return copy;
  }

  void end_step() override {
    if (!plain_ || plain_->length() < spec_.start || plain_->length() == 0) return;
    coded_ = make_paged(pool_, spec_, *spec_.coded);
    // A sliding layer converts only the rows its window can still reach.
    int64_t from = plain_->first_position();
    if (spec_.window) from = std::max(from, plain_->length() - (*spec_.window - 1));
    coded_->start_at(from);
    const int64_t first_row = from - plain_->first_position(), rows = plain_->length() - from;
    const KvFormat& f = spec_.plain;
    const int64_t n = std::max<int64_t>(1, std::min(rows, kKvConvertRows));
    Backend& backend = pool_->backend();
    Tensor k = backend.empty({n, f.kv_heads, f.head_dim}, DType::f32), v = backend.empty(k.shape(), DType::f32);
    for (int64_t r = 0; r < rows; r += n) {
      const int64_t count = std::min(n, rows - r);
      Tensor kr = k.slice_rows(0, count), vr = v.slice_rows(0, count);
      plain_->read_rows(first_row + r, kr, vr);
      coded_->append(kr, vr);
    }
    plain_.reset();
  }

 private:
  PagedKvLayer& layer() const { return plain_ ? *plain_ : *coded_; }

  std::shared_ptr<KvBlockPool> pool_;
  KvLayerSpec spec_;
  std::unique_ptr<PagedKvLayer> plain_, coded_;
};

}  // namespace

std::unique_ptr<KvLayer> make_kv_layer(std::shared_ptr<KvBlockPool> pool, const KvLayerSpec& spec) {
  check(spec.capacity > 0, "kv layer: capacity must be positive, got ", spec.capacity);
  check(!spec.window || *spec.window > 0, "kv layer: window must be positive, got ", spec.window.value_or(0));
  if (spec.coded && spec.start > 0) return std::make_unique<DelayedCodecKvLayer>(std::move(pool), spec);
  return make_paged(pool, spec, spec.coded ? *spec.coded : spec.plain);
}

}  // namespace fathom

#include "kv/rotating_kv_layer.h"

#include <algorithm>

#include "core/error.h"

namespace fathom {

int64_t kv_layer_rows(const ModelConfig& config, int64_t layer, int64_t capacity, int64_t step) {
  if (config.layer_types[size_t(layer)] != LayerKind::sliding_attention) return capacity;
  return std::min(capacity, *config.sliding_window - 1 + step);
}

namespace {

class RotatingKvLayer final : public KvLayer {
 public:
  RotatingKvLayer(std::unique_ptr<KvLayer> storage, int64_t window, int64_t capacity)
      : storage_(std::move(storage)), window_(window), capacity_(capacity) {
    check(window > 0, "sliding kv layer: window must be positive, got ", window);
    check(storage_->capacity() >= std::min(capacity, window),
          "sliding kv layer: storage of ", storage_->capacity(), " rows cannot hold a window of ", window);
  }

  int64_t length() const override { return storage_->length(); }
  int64_t first_position() const override { return storage_->first_position(); }
  int64_t capacity() const override { return capacity_; }

  void append(const Tensor& k, const Tensor& v) override {
    const int64_t count = k.dim(0);
    check(length() + count <= capacity_, "kv append: ", length(), " + ", count,
          " tokens exceed the capacity of ", capacity_);
    const int64_t held = length() - first_position();
    if (held + count > storage_->capacity()) {
      // Keep the last window - 1 positions: all the first new query can see.
      const int64_t keep = std::min(held, window_ - 1);
      check(keep + count <= storage_->capacity(), "sliding kv layer: a step of ", count,
            " tokens does not fit beside the window (", storage_->capacity(), " rows)");
      storage_->drop_front(held - keep);
    }
    storage_->append(k, v);
  }

  void attend(Backend& backend, const Tensor& q, const AttentionParams& p, Tensor& out) const override {
    storage_->attend(backend, q, p, out);
  }

  void trim(int64_t new_length) override { storage_->trim(new_length); }
  void drop_front(int64_t count) override { storage_->drop_front(count); }
  void end_step() override { storage_->end_step(); }
  int64_t conversion_at() const override { return storage_->conversion_at(); }
  int64_t bytes() const override { return storage_->bytes(); }
  KvView view() const override { return storage_->view(); }

 private:
  std::unique_ptr<KvLayer> storage_;
  int64_t window_, capacity_;
};

}  // namespace

std::unique_ptr<KvLayer> make_rotating_kv_layer(std::unique_ptr<KvLayer> storage, int64_t window, int64_t capacity) {
  return std::make_unique<RotatingKvLayer>(std::move(storage), window, capacity);
}

}  // namespace fathom

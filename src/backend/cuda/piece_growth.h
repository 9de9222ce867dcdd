#pragma once
// How fast a recorded step's pieces grow (step_graph.h). A step runs as
// graphs, a piece at a time, so that the GPU starts while the host records
// the rest. But the first kernel of a piece cannot overlap the last kernel
// of the piece before (kernel_overlap.h does not reach across graphs), and
// on an H100 each piece boundary cost an 8B decode step about 12 µs of GPU
// time (bench/RESULTS.md, thirty-fourth session). Fewer, longer pieces are
// faster, as long as the host records each piece before the GPU has run the
// one before it: a piece f times as long as the last one asks the host to
// record a call in 1/f of the GPU's time for one. So the growth is chosen
// from the first replayed steps' pace, the GPU's time for a step against the
// host's, with half of it kept as margin. Once chosen it stays, so that the
// pieces' shapes (and so their graphs) stay the same from then on.
// Host code, no CUDA: its test runs on every machine.
#include <cstddef>

namespace fathom::cuda {

class PieceGrowth {
 public:
  static constexpr size_t kDefault = 2, kMax = 8;
  static constexpr int kSamples = 8;  // replayed steps timed before choosing

  // Each piece's calls over the last piece's.
  size_t factor() const { return factor_; }
  // A replayed step: the host's time recording and launching it, the GPU's
  // running it (skipped where either is unknown).
  void sample(double host_seconds, double gpu_seconds) {
    if (samples_ >= kSamples || !(host_seconds > 0.0) || !(gpu_seconds > 0.0)) return;
    host_seconds_ += host_seconds;
    gpu_seconds_ += gpu_seconds;
    if (++samples_ < kSamples) return;
    const double pace = gpu_seconds_ / host_seconds_;  // GPU time a call over the host's
    while (factor_ < kMax && 2.0 * double(2 * factor_) <= pace) factor_ *= 2;
  }

 private:
  size_t factor_ = kDefault;
  int samples_ = 0;
  double host_seconds_ = 0.0, gpu_seconds_ = 0.0;
};

}  // namespace fathom::cuda

#pragma once
// Measurement helpers shared by the benchmarks (bench/) and `dgemma bench`:
// the machine's peak FLOP rate from register-only FMA / vdpbf16ps loops, op
// timing, and a FLOP counter over the op vocabulary (an OpObserver, so any
// pass of any model can be counted exactly, masks included).
#include <array>
#include <cstdint>

#include "core/cpu_features.h"
#include "ops/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace dgemma::cpu {

struct PeakRates {
  CpuIsa isa = CpuIsa::kScalar;
  int threads = 1;
  double fma_gflops = 0;  // fp32 FMA (2 FLOP per lane)
  double dot_gflops = 0;  // vdpbf16ps (4 FLOP per lane: two products, two adds); 0 without AVX512_BF16
};

// Runs the loops of `isa` on `threads` threads at once, 15 runs of about
// seconds/5 each, best kept. Noisy on a shared machine, like every figure
// here: compare ratios measured in the same run.
PeakRates measure_peak(CpuIsa isa, int threads, double seconds = 0.15);

// Best wall time of the op on `backend` over at least `repeats` runs and at
// least 0.3 s, after one warm-up run (which also packs the weights).
double time_op(Backend& backend, const OpCall& call, int repeats);

// FLOP of one op call: 2 per multiply-add of the GEMM-shaped ops (linear,
// router scores, expert GEMMs, soft-embedding product, QKᵀ and P·V over the
// visible keys); elementwise work is not counted.
double op_flops(const OpCall& call);

// Counts FLOP (op_flops) and wall time per op kind. The time of an op is the
// time since the previous op (or since reset()), so the model's glue between
// ops (key gathers, allocations) is charged to the op that follows it.
class OpProfile : public OpObserver {
 public:
  OpProfile() { reset(); }
  void on_op(const OpCall& call) override;
  void reset();
  double total_flops() const { return total_flops_; }
  double flops(OpKind k) const { return flops_[size_t(k)]; }
  double seconds(OpKind k) const { return seconds_[size_t(k)]; }
  double total_seconds() const;
  // Time of the ops inside transformer layers (OpCall::layer >= 0).
  double layer_seconds() const { return layer_seconds_; }
  // Replaces the observed (host) times by times measured elsewhere, e.g. a
  // device's own per-op times; the FLOP counts stay.
  void clear_seconds();
  void add_seconds(OpKind kind, bool in_layer, double seconds);

 private:
  double last_ = 0, total_flops_ = 0, layer_seconds_ = 0;
  std::array<double, kNumOpKinds> flops_{}, seconds_{};
};

}  // namespace dgemma::cpu

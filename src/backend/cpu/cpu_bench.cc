#include "backend/cpu/cpu_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/thread_pool.h"
#include "backend/cpu/cpu_levels.h"
#include "backend/cpu/isa_kernels.h"

namespace dgemma::cpu {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// GFLOP/s of `loop` on all threads of `pool` at once.
double run_peak(double (*loop)(int64_t, float), ThreadPool& pool, double seconds) {
  // Calibrate on one thread: iterations for ~seconds.
  int64_t iters = 1 << 16;
  for (;;) {
    const double t0 = now_s();
    loop(iters, 1.0f);
    const double dt = now_s() - t0;
    if (dt > 0.02) {
      iters = int64_t(double(iters) * seconds / dt) + 1;
      break;
    }
    iters *= 4;
  }
  // Many short runs, best kept: on a shared machine the best window is the
  // one least disturbed by other processes.
  double best = 0;
  for (int rep = 0; rep < 15; ++rep) {
    std::vector<double> flops(size_t(pool.size()), 0.0);
    const double t0 = now_s();
    pool.parallel_for(pool.size(), 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) flops[size_t(t)] = loop(iters, 1.0f + float(t));
    });
    const double dt = now_s() - t0;
    double f = 0;
    for (double x : flops) f += x;
    best = std::max(best, f / dt / 1e9);
  }
  return best;
}

}  // namespace

PeakRates measure_peak(CpuIsa isa, int threads, double seconds) {
  seconds /= 5;
  PeakRates r;
  r.isa = isa;
  ThreadPool pool(threads);
  r.threads = pool.size();
  if (clamp_isa(isa) != isa) return r;  // a level this CPU does not run
  const IsaKernels* k = cpu_level_kernels(isa).dense;
  if (!k) return r;
  if (k->peak_fma) r.fma_gflops = run_peak(k->peak_fma, pool, seconds);
  if (k->peak_dot) r.dot_gflops = run_peak(k->peak_dot, pool, seconds);
  return r;
}

double time_op(Backend& backend, const OpCall& call, int repeats) {
  prepare_op(call);
  backend.run(call);
  // At least `repeats` runs and at least 0.3 s of them (short ops get more
  // tries at an undisturbed window), at most 200.
  double best = 1e30, total = 0;
  for (int r = 0; r < 200 && (r < std::max(1, repeats) || total < 0.3); ++r) {
    const double t0 = now_s();
    backend.run(call);
    const double dt = now_s() - t0;
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

double op_flops(const OpCall& c) {
  switch (c.kind) {
    case OpKind::kLinear: return 2.0 * double(c.in[0]->dim(0)) * double(c.w[0]->shape[0]) * double(c.in[0]->dim(1));
    case OpKind::kRouterTopk: return 2.0 * double(c.in[0]->dim(0)) * double(c.w[1]->shape[0]) * double(c.in[0]->dim(1));
    case OpKind::kMoeExperts: {
      const double slots = double(c.in[1]->numel()), H = double(c.in[0]->dim(1)), I2 = double(c.w[0]->shape[1]);
      return 2.0 * slots * (I2 * H + H * I2 / 2);
    }
    case OpKind::kSoftEmbedding: return 2.0 * double(c.in[0]->numel()) * double(c.w[0]->shape[1]);
    case OpKind::kAttention: {
      const Tensor &q = *c.in[0], &qpos = *c.in[3];
      const Tensor* blocks = attention_blocks(c);
      const AttentionKeys keys = attention_keys(c);
      double visible = 0;
      for (const AttentionKeyPart& part : keys.parts) {
        if (part.rows == 0) continue;
        const bool new_rows = &part == &keys.parts[1];  // the cache's keys have no image block
        for (int64_t m = 0; m < qpos.numel(); ++m)
          for (int64_t s = part.first; s < part.first + part.rows; ++s)
            visible +=
                attention_visible(c.attrs, qpos.i[size_t(m)], part.pos->i[size_t(s)],
                                  blocks ? blocks->i[size_t(m)] : -1, blocks && new_rows ? blocks->i[size_t(s)] : -1);
      }
      return 4.0 * visible * double(q.dim(1)) * double(q.dim(2));
    }
    case OpKind::kAffine: return 2.0 * double(c.in[0]->numel());
    case OpKind::kPoolCells: return 2.0 * double(c.in[0]->numel());
    default: return 0.0;
  }
}

void OpProfile::on_op(const OpCall& call) {
  const double t = now_s(), f = op_flops(call);
  total_flops_ += f;
  flops_[size_t(call.kind)] += f;
  seconds_[size_t(call.kind)] += t - last_;
  if (call.layer >= 0) layer_seconds_ += t - last_;
  last_ = t;
}

void OpProfile::reset() {
  total_flops_ = 0;
  layer_seconds_ = 0;
  flops_.fill(0.0);
  seconds_.fill(0.0);
  last_ = now_s();
}

void OpProfile::clear_seconds() {
  layer_seconds_ = 0;
  seconds_.fill(0.0);
}

void OpProfile::add_seconds(OpKind kind, bool in_layer, double seconds) {
  seconds_[size_t(kind)] += seconds;
  if (in_layer) layer_seconds_ += seconds;
}

double OpProfile::total_seconds() const {
  double s = 0;
  for (double x : seconds_) s += x;
  return s;
}

}  // namespace dgemma::cpu

// dgemma bench vision -m DIR [--json] [-t N] [--height H] [--width W] [--repeats N] [--estimate-layers N]
//
// The speed of the vision tower (docs/model.md §7) on the CPU backend: one
// synthetic image (generated pixels, preprocessed as a decoded file would be,
// docs/image.md) through the tower and embed_vision, split by op with the
// FLOP of the op vocabulary (backend/cpu/cpu_bench.h), against a
// canvas-shaped linear timed in the same run. On a slice with a few tower
// layers (`dgemma bench slice --vision-layers 2`) it also estimates the
// whole tower's time per image.
#include "bench_vision.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "bench_clock.h"
#include "bench_step.h"
#include "core/cpu_features.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "flags.h"
#include "image/image_preprocess.h"
#include "image/image_processor_config.h"
#include "image/rgb_image.h"
#include "model/diffusion_gemma.h"
#include "model_flags.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_bench.h"

namespace dgemma::cli {
namespace {

struct VisionFlags {
  ModelFlags mf;
  bool as_json = false;
  int64_t height = 672, width = 960, repeats = 3, estimate_layers = 27;
};

bool parse_vision_flags(const Args& args, VisionFlags& f) {
  FlagParser p(
      "dgemma bench vision -m DIR [--json] [-t N] [--height H] [--width W] [--repeats N] [--estimate-layers N]",
      "Times the vision tower of a checkpoint on one synthetic H x W image (default 672 x 960: 2,520\n"
      "patches, 280 soft tokens at patch 16 and pooling 3), preprocessed as a decoded file is. Reports\n"
      "the tower's time and FLOP by op (op vocabulary, exact per call), its GEMM rate (linears) and\n"
      "attention rate, the rate of both together, and their ratios to a canvas-shaped linear (canvas x\n"
      "hidden x hidden, bf16 weights) timed in the same run; and, for a tower with fewer layers than\n"
      "--estimate-layers (e.g. `dgemma bench slice --vision-layers 2`), the estimated time per image of\n"
      "that many layers (per-layer time x N + the ops outside layers). CPU backend only.");
  f.mf.add_to(p);
  p.add_bool("--json", &f.as_json, "one JSON object");
  p.add_int("--height", &f.height, "image height in pixels", 1, 1 << 15);
  p.add_int("--width", &f.width, "image width in pixels", 1, 1 << 15);
  p.add_int("--repeats", &f.repeats, "timed runs of the tower (best kept)", 1);
  p.add_int("--estimate-layers", &f.estimate_layers, "tower layer count for the full-tower estimate", 1);
  if (!p.parse(args)) return false;
  if (!p.positional().empty()) throw UsageError("bench vision: unexpected argument '" + p.positional()[0] + "'");
  if (f.mf.backend != "cpu")
    throw UsageError("bench vision: runs on the CPU backend (its op accounting); --backend " + f.mf.backend +
                     " is not supported");
  return true;
}

// Deterministic pixels with edges and gradients (the values do not change
// the work; they only keep the resize and the tower away from constants).
RgbImage synthetic_image(int64_t height, int64_t width) {
  RgbImage im = RgbImage::zeros(height, width);
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      uint8_t* p = im.row(y) + 3 * x;
      p[0] = uint8_t((x * 255) / std::max<int64_t>(1, width - 1));
      p[1] = uint8_t((y * 255) / std::max<int64_t>(1, height - 1));
      p[2] = uint8_t(((x / 16 + y / 16) % 2) * 200 + (x * 7 + y * 13) % 56);
    }
  return im;
}

struct VisionTimes {
  double first = 0;     // incl. packing the weights
  double best = 0;      // the fastest profiled run
  cpu::OpProfile prof;  // its split by op
  double canvas_linear_s = 0, canvas_linear_flop = 0;
  int64_t canvas_m = 0, canvas_k = 0, canvas_n = 0;
};

// A canvas-shaped linear (the text model's canvas rows through a hidden x
// hidden bf16 weight, as `bench step`'s projections), timed on `backend`.
void time_canvas_linear(CpuBackend& backend, const ModelConfig& c, int64_t canvas, int repeats, VisionTimes& t) {
  t.canvas_m = canvas;
  t.canvas_k = c.hidden_size;
  t.canvas_n = c.hidden_size;
  Tensor x = Tensor::f32({t.canvas_m, t.canvas_k}), out;
  uint64_t s = 12345;
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return float(s >> 40) * (2.0f / 16777216.0f) - 1.0f;
  };
  for (float& v : x.f) v = next();
  std::vector<uint16_t> wb(size_t(t.canvas_n * t.canvas_k));
  for (uint16_t& v : wb) v = f32_to_bf16(0.04f * next());
  WeightRef w;
  w.name = "canvas_linear";
  w.dtype = DType::kBF16;
  w.shape = {t.canvas_n, t.canvas_k};
  w.data = wb.data();
  OpCall call;
  call.kind = OpKind::kLinear;
  call.in = {&x};
  call.w = {&w};
  call.out = {&out};
  prepare_op(call);
  t.canvas_linear_flop = cpu::op_flops(call);
  t.canvas_linear_s = cpu::time_op(backend, call, repeats);
}

struct Derived {
  double peak = 0;
  double gemm_gflops = 0, attention_gflops = 0, gemm_attention_gflops = 0, canvas_gflops = 0;
  double layer_s = 0, other_s = 0, estimate_s = 0;  // per layer, outside layers, for estimate_layers
  int layers = 0;
};

Derived derive(const VisionFlags& f, const ModelConfig& c, CpuBackend& cpu, const VisionTimes& t) {
  Derived d;
  const cpu::PeakRates pk = cpu::measure_peak(cpu.isa(), cpu.pool().size());
  d.peak = cpu.bf16_dot() ? pk.dot_gflops : pk.fma_gflops;
  const cpu::OpProfile& p = t.prof;
  auto rate = [](double flop, double s) { return s > 0 ? flop / s / 1e9 : 0.0; };
  d.gemm_gflops = rate(p.flops(OpKind::kLinear), p.seconds(OpKind::kLinear));
  d.attention_gflops = rate(p.flops(OpKind::kAttention), p.seconds(OpKind::kAttention));
  d.gemm_attention_gflops = rate(p.flops(OpKind::kLinear) + p.flops(OpKind::kAttention),
                                 p.seconds(OpKind::kLinear) + p.seconds(OpKind::kAttention));
  d.canvas_gflops = rate(t.canvas_linear_flop, t.canvas_linear_s);
  // The best run's time, split as the profiled run's.
  d.layers = c.vision.num_layers;
  const double share = p.layer_seconds() / std::max(1e-12, p.total_seconds());
  d.layer_s = t.best * share / double(d.layers);
  d.other_s = t.best * (1 - share);
  d.estimate_s = d.layer_s * double(f.estimate_layers) + d.other_s;
  return d;
}

json::Value vision_json(const VisionFlags& f, const ModelConfig& c, CpuBackend& cpu, const VisionInput& im,
                        const VisionTimes& t, const Derived& d) {
  const VisionConfig& v = c.vision;
  json::Value j = json::Object{};
  j.set("name", "vision");
  j.set("model", f.mf.model_dir);
  j.set("backend", "cpu");
  j.set("threads", cpu.pool().size());
  j.set("isa", std::string(isa_name(cpu.isa())));
  j.set("mode", cpu.bf16_dot() ? "dot" : "fma");
  j.set("precision", f.mf.precision);
  j.set("vision_layers", d.layers);
  j.set("hidden", v.hidden_size);
  j.set("heads", v.num_heads);
  j.set("head_dim", v.head_dim);
  j.set("intermediate", v.intermediate_size);
  j.set("image_height", f.height);
  j.set("image_width", f.width);
  j.set("patches", im.pixel_values.dim(0));
  j.set("soft_tokens", im.n_soft);
  j.set("first_s_incl_packing", t.first);
  j.set("tower_s", t.best);
  j.set("tower_flop", t.prof.total_flops());
  j.set("gflops", t.prof.total_flops() / t.best / 1e9);
  j.set("peak_gflops", d.peak);
  j.set("gemm_gflops", d.gemm_gflops);
  j.set("attention_gflops", d.attention_gflops);
  j.set("gemm_attention_gflops", d.gemm_attention_gflops);
  j.set("canvas_linear_gflops", d.canvas_gflops);
  json::Array shape;
  for (int64_t x : {t.canvas_m, t.canvas_k, t.canvas_n}) shape.emplace_back(x);
  j.set("canvas_linear_mkn", shape);
  j.set("gemm_ratio_to_canvas", d.canvas_gflops > 0 ? d.gemm_gflops / d.canvas_gflops : 0.0);
  j.set("gemm_attention_ratio_to_canvas", d.canvas_gflops > 0 ? d.gemm_attention_gflops / d.canvas_gflops : 0.0);
  j.set("layer_s", d.layer_s);
  j.set("outside_layers_s", d.other_s);
  j.set("estimate_layers", f.estimate_layers);
  j.set("estimate_s", d.estimate_s);
  j.set("by_op", op_profile_json(t.prof));
  return j;
}

void print_vision(const VisionFlags& f, const ModelConfig& c, CpuBackend& cpu, const VisionInput& im,
                  const VisionTimes& t, const Derived& d) {
  const VisionConfig& v = c.vision;
  std::printf("model %s: vision tower of %d layers (hidden %d, %d heads of %d, MLP %d); %d threads, %s, mode %s\n",
              f.mf.model_dir.c_str(), d.layers, v.hidden_size, v.num_heads, v.head_dim, v.intermediate_size,
              cpu.pool().size(), std::string(isa_name(cpu.isa())).c_str(), cpu.bf16_dot() ? "dot" : "fma");
  std::printf("image %lld x %lld: %lld patches, %lld soft tokens\n", (long long)f.height, (long long)f.width,
              (long long)im.pixel_values.dim(0), (long long)im.n_soft);
  std::printf("tower (first run, incl. weight packing): %.3f s\n", t.first);
  std::printf("tower: %.3f s, %.1f GFLOP, %.1f GFLOP/s (%.0f%% of the %s peak %.0f)\n", t.best,
              t.prof.total_flops() / 1e9, t.prof.total_flops() / t.best / 1e9,
              d.peak > 0 ? 100 * t.prof.total_flops() / t.best / 1e9 / d.peak : 0.0, cpu.bf16_dot() ? "dot" : "fma",
              d.peak);
  std::printf("tower by op:\n");
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = OpKind(k);
    if (t.prof.seconds(kind) <= 0) continue;
    const double s = t.prof.seconds(kind), fl = t.prof.flops(kind);
    std::printf("  %-15s %7.3f s  %6.1f%%  %8.2f GFLOP  %7.1f GFLOP/s\n", std::string(op_name(kind)).c_str(), s,
                100 * s / t.prof.total_seconds(), fl / 1e9, fl > 0 ? fl / s / 1e9 : 0.0);
  }
  std::printf("canvas linear M=%lld K=%lld N=%lld (bf16): %.1f GFLOP/s\n", (long long)t.canvas_m, (long long)t.canvas_k,
              (long long)t.canvas_n, d.canvas_gflops);
  std::printf(
      "GEMM rate: %.1f GFLOP/s (%.0f%% of the canvas linear); attention %.1f GFLOP/s; "
      "GEMM + attention %.1f GFLOP/s (%.0f%% of the canvas linear)\n",
      d.gemm_gflops, d.canvas_gflops > 0 ? 100 * d.gemm_gflops / d.canvas_gflops : 0.0, d.attention_gflops,
      d.gemm_attention_gflops, d.canvas_gflops > 0 ? 100 * d.gemm_attention_gflops / d.canvas_gflops : 0.0);
  std::printf("per layer %.3f s, outside layers %.3f s; estimated %lld-layer tower: %.2f s per %lld-token image\n",
              d.layer_s, d.other_s, (long long)f.estimate_layers, d.estimate_s, (long long)im.n_soft);
}

}  // namespace

int run_bench_vision(const Args& args) {
  VisionFlags f;
  if (!parse_vision_flags(args, f)) return 0;
  std::unique_ptr<DiffusionGemma> model = f.mf.load();
  const ModelConfig& c = model->config();
  if (!model->has_vision_tower())
    throw Error("bench vision: " + f.mf.model_dir +
                " has no vision tower (a slice with one: dgemma bench slice --vision-layers 2)");
  CpuBackendOptions o;
  o.threads = int(f.mf.threads);
  o.bf16_dot = f.mf.bf16_dot();
  o.int8_dot = f.mf.int8_dot();
  CpuBackend cpu(o);
  model->set_backend(cpu);
  // The image as a decoded file would be: resized to the model's grid and patchified.
  ImageProcessorConfig pc = read_image_processor_config(f.mf.model_dir);
  pc.patch_size = c.vision.patch_size;
  pc.pooling_kernel_size = c.vision.pooling_kernel_size;
  const VisionInput im = preprocess_image(synthetic_image(f.height, f.width), pc, &cpu.pool()).input;
  VisionTimes t;
  double t0 = now_s();
  model->image_soft_tokens(im);  // packs the weights
  t.first = now_s() - t0;
  // Every timed run is profiled (the observer's own cost is small next to
  // the ops); the fastest run's split by op is the one reported, so the
  // rates and the estimate come from the same run.
  t.best = 1e30;
  cpu::OpProfile prof;
  model->set_observer(&prof);
  for (int64_t r = 0; r < f.repeats; ++r) {
    prof.reset();
    t0 = now_s();
    model->image_soft_tokens(im);
    const double dt = now_s() - t0;
    if (dt < t.best) {
      t.best = dt;
      t.prof = prof;
    }
  }
  model->set_observer(nullptr);
  time_canvas_linear(cpu, c, model->canvas_length(), int(f.repeats), t);
  const Derived d = derive(f, c, cpu, t);
  if (f.as_json)
    std::printf("%s\n", json::dump(vision_json(f, c, cpu, im, t, d)).c_str());
  else
    print_vision(f, c, cpu, im, t, d);
  return 0;
}

}  // namespace dgemma::cli

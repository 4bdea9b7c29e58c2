// The self-conditioned denoising step on the 2-layer real-dimension slice
// (checkpoint/model_slice.h; bench/model_step_bench.cc) with its weights as
// ggml blocks of the published Q4_K_M mix on the integer-dot path
// (backend/cpu/int8_dot.h), against the exact path on the slice's bf16
// weights, in the same process, interleaved. Three runs per round: exact
// (fma) on bf16 weights; int8-dot alone on the ggml blocks (every other op
// as in the exact run); and `--precision int8-dot` as the CLI sets it
// (int8-dot plus bf16-dot for the other products, the soft embedding
// included). The weights:
//   Q6_K  embed_tokens (the LM head; the soft embedding multiplies its dense
//         copy) and attention v of layer 0
//   Q8_0  dense and expert down projections of layer 0, Q5_0 of layer 1
//         (about half the layers each in the published file), and
//         self-conditioning down Q5_0
//   Q4_K  every other projection and the experts' gate_up
// (docs/formats.md §5.3). Norms, the router and scalars stay as stored. The
// blocks are random (no quantizer is needed), scaled to the standard
// deviation of the bf16 weight they replace, so the activations keep their
// magnitudes. Prints the best step of each, the per-op split and the
// 30-layer estimate (layer ops × 15, model-level ops once), as `dgemma bench
// step` does.
//
//   build/release/bench_ggml_step_bench [reps]      ($DGEMMA_BENCH_SLICE, as model_step_bench)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "bench_common.h"
#include "random_ggml.h"
#include "checkpoint/model_slice.h"
#include "core/ggml_types.h"
#include "cpu_model.h"
#include "model/diffusion_gemma.h"
#include "quantize/quantized_weight.h"

namespace dgemma::bench {
namespace {

constexpr int64_t kPrompt = 512;

// Standard deviation of a float weight, from a sample of its entries.
float weight_std(const WeightRef& w) {
  int64_t n = 1;
  for (int64_t e : w.shape) n *= e;
  double s = 0, s2 = 0;
  const int64_t step = std::max<int64_t>(1, n / 65536);
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; i += step, ++cnt) {
    const float v = w.dtype == DType::kBF16 ? bf16_to_f32(static_cast<const uint16_t*>(w.data)[i])
                                            : static_cast<const float*>(w.data)[i];
    s += v;
    s2 += double(v) * v;
  }
  const double mean = s / double(cnt);
  return float(std::sqrt(std::max(1e-20, s2 / double(cnt) - mean * mean)));
}

// `plain` as ggml blocks of type t (random, its standard deviation).
WeightRef ggml_weight(const WeightRef& plain, GgmlType t, uint64_t seed) {
  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = QuantScheme::kGgml;
  q->ggml_type = t;
  q->shape = plain.shape;
  q->dtype = DType::kBF16;
  q->cols = plain.shape.back();
  q->rows = 1;
  for (size_t i = 0; i + 1 < plain.shape.size(); ++i) q->rows *= plain.shape[i];
  q->block = ggml_traits(t).block_elems;
  q->owned.push_back(ggml_bench::random_blocks(t, q->rows, q->cols, weight_std(plain), seed));
  q->stored_bytes = q->owned.back().size();
  q->slices = {QuantSlice{0, q->rows, q->owned.back().data()}};
  q->describe = "ggml " + std::string(ggml_type_name(t));
  WeightRef w = plain;
  w.dtype = DType::kBF16;
  w.data = q->slices.front().codes;
  w.quant = q;
  return w;
}

// The Q4_K_M mix of the module comment over a copy of the model's weights.
ModelWeights q4_k_m(const ModelWeights& mw, uint64_t& bytes) {
  ModelWeights g;
  g.embed = mw.embed;
  g.final_norm = mw.final_norm;
  g.sc_pre_norm = mw.sc_pre_norm;
  g.layers = mw.layers;
  uint64_t seed = 1;
  auto put = [&](WeightRef& dst, const WeightRef& src, GgmlType t) {
    dst = ggml_weight(src, t, seed++);
    bytes += dst.quant->stored_bytes;
  };
  put(g.embed, mw.embed, GgmlType::kQ6_K);
  put(g.sc_gate, mw.sc_gate, GgmlType::kQ4_K);
  put(g.sc_up, mw.sc_up, GgmlType::kQ4_K);
  put(g.sc_down, mw.sc_down, GgmlType::kQ5_0);
  for (size_t i = 0; i < mw.layers.size(); ++i) {
    const LayerWeights& s = mw.layers[i];
    LayerWeights& d = g.layers[i];
    const GgmlType down = i == 0 ? GgmlType::kQ8_0 : GgmlType::kQ5_0;
    for (auto m : {&LayerWeights::q_proj, &LayerWeights::k_proj, &LayerWeights::o_proj, &LayerWeights::mlp_gate,
                   &LayerWeights::mlp_up, &LayerWeights::experts_gate_up})
      put(d.*m, s.*m, GgmlType::kQ4_K);
    if (s.v_proj.data) put(d.v_proj, s.v_proj, i == 0 ? GgmlType::kQ6_K : GgmlType::kQ4_K);
    put(d.mlp_down, s.mlp_down, down);
    put(d.experts_down, s.experts_down, down);
  }
  return g;
}

// The weights the model's ops read (only the projections and the embedding
// differ between the two sets).
void swap_in(DiffusionGemma& m, const ModelWeights& from) {
  // The model exposes its weights read-only; the benchmark alone swaps them
  // between steps (no op is running).
  auto& w = const_cast<ModelWeights&>(m.weights());
  w.embed = from.embed;
  w.sc_gate = from.sc_gate;
  w.sc_up = from.sc_up;
  w.sc_down = from.sc_down;
  w.layers = from.layers;
}

struct Result {
  double best = 1e30;
  cpu::OpProfile prof;
};

void step(DiffusionGemma& m, Backend& b, const std::vector<int32_t>& canvas, const std::vector<float>& prev,
          std::vector<float>& logits, Result& r, bool profile) {
  m.set_backend(b);
  m.decode(canvas.data(), prev.data(), logits.data());  // warm-up: packs, dense copies
  if (profile) {
    m.set_observer(&r.prof);
    r.prof.reset();
    m.decode(canvas.data(), prev.data(), logits.data());
    m.set_observer(nullptr);
  }
  const double t0 = now_s();
  m.decode(canvas.data(), prev.data(), logits.data());
  r.best = std::min(r.best, now_s() - t0);
}

// The 30-layer step: the best step with its layer ops' share (from the
// profiled run) scaled from `layers` to 30.
double estimate(const Result& r, int layers) {
  const double layer = r.prof.layer_seconds(), total = r.prof.total_seconds();
  return r.best / total * (layer * (30.0 / layers) + (total - layer));
}

void report(const char* label, const Result& r, int layers) {
  const double total = r.prof.total_seconds();
  std::printf("%-32s step %.3f s, 30-layer estimate %.2f s; by op (profiled run):", label, r.best, estimate(r, layers));
  for (int k = 0; k < kNumOpKinds; ++k)
    if (r.prof.seconds(OpKind(k)) > 0.02 * total)
      std::printf(" %s %.3f", std::string(op_name(OpKind(k))).c_str(), r.prof.seconds(OpKind(k)));
  std::printf("\n");
}

}  // namespace
}  // namespace dgemma::bench

int main(int argc, char** argv) {
  using namespace dgemma;
  using namespace dgemma::bench;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 3;
  const char* env = std::getenv("DGEMMA_BENCH_SLICE");
  const std::string dir =
      env && *env ? env : (std::filesystem::temp_directory_path() / "dgemma_bench_slice_2l").string();
  ensure_model_slice(dir, 2);
  ModelOptions o;
  o.load_threads = all_threads();
  o.verify_tied_copies = false;
  auto model = test::load_on_cpu(dir, o);
  DiffusionGemma& m = *model;
  std::vector<int32_t> prompt(static_cast<size_t>(kPrompt));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 2) % 262144);
  CpuBackendOptions exact_o, dot_o, cli_o;
  exact_o.threads = dot_o.threads = cli_o.threads = all_threads();
  dot_o.int8_dot = cli_o.int8_dot = cli_o.bf16_dot = true;
  CpuBackend exact(exact_o), dot(dot_o), cli(cli_o);
  m.set_backend(exact);
  m.encode(prompt);
  const int64_t L = m.canvas_length(), V = m.vocab_size();
  std::vector<int32_t> canvas(static_cast<size_t>(L));
  for (size_t i = 0; i < canvas.size(); ++i) canvas[i] = int32_t((i * 104729 + 17) % size_t(V));
  std::vector<float> prev(size_t(L * V)), logits(size_t(L * V));
  m.decode(canvas.data(), nullptr, prev.data());  // the previous step's logits, shared by both

  const ModelWeights bf16 = [&] {
    ModelWeights c;
    const ModelWeights& w = m.weights();
    c.embed = w.embed, c.sc_gate = w.sc_gate, c.sc_up = w.sc_up, c.sc_down = w.sc_down, c.layers = w.layers;
    return c;
  }();
  uint64_t bytes = 0;
  const ModelWeights ggml = q4_k_m(m.weights(), bytes);
  std::printf("slice %s, %d threads, %s; Q4_K_M blocks %.2f GB\n", dir.c_str(), all_threads(),
              std::string(isa_name(exact.isa())).c_str(), double(bytes) / 1e9);
  Result r_exact, r_ggml, r_cli;
  for (int rep = 0; rep < reps; ++rep) {
    swap_in(m, bf16);
    step(m, exact, canvas, prev, logits, r_exact, rep == 0);
    swap_in(m, ggml);
    step(m, dot, canvas, prev, logits, r_ggml, rep == 0);
    step(m, cli, canvas, prev, logits, r_cli, rep == 0);
  }
  swap_in(m, bf16);
  const int layers = int(m.weights().layers.size());
  report("exact, bf16 weights", r_exact, layers);
  report("int8-dot, Q4_K_M ggml blocks", r_ggml, layers);
  report("--precision int8-dot, Q4_K_M", r_cli, layers);
  for (const Result* r : {&r_ggml, &r_cli})
    std::printf("%s: speed-up of the step %.2fx (slice), of the 30-layer estimate %.2fx\n",
                r == &r_ggml ? "int8-dot" : "--precision int8-dot", r_exact.best / r->best,
                estimate(r_exact, layers) / estimate(*r, layers));
  return 0;
}

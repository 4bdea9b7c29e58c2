// dgemma bench kernels [--json] [-t N]
// dgemma bench step -m DIR [--json] [-t N] [--context N] [--steps N] [--batch N] [--bf16-dot] [--backend NAME]
// dgemma bench slice -o DIR [--layers N]
//
// Speed of the CPU backend: kernel GFLOP/s against OpenBLAS cblas_sgemm
// (opened at run time if installed; else the scalar reference kernel), both
// measured in the same run, and the machine's peak (register-only FMA /
// vdpbf16ps loops); and the speed of whole denoising steps of a checkpoint,
// on the CPU or on any other backend (--backend, e.g. cuda).
// The Google Benchmark binaries in bench/ (scripts/bench.sh) cover more.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "checkpoint/model_slice.h"
#include "cli.h"
#include "core/cpu_features.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "flags.h"
#include "model/diffusion_gemma.h"
#include "model_flags.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/blas_baseline.h"
#include "backend/cpu/cpu_bench.h"

namespace dgemma::cli {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void fill(std::vector<float>& v, float scale, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 99;
  for (float& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = scale * (float(s >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

void emit(bool as_json, const json::Value& line, const std::string& text) {
  if (as_json)
    std::printf("%s\n", json::dump(line).c_str());
  else
    std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

std::string fmt(const char* f, double a) {
  char b[64];
  std::snprintf(b, sizeof b, f, a);
  return b;
}

// Best wall time of fn over `repeats` runs (at least 0.3 s), after a warm-up.
template <class Fn>
double best_time(int repeats, Fn&& fn) {
  fn();
  double best = 1e30, spent = 0;
  for (int r = 0; r < repeats || spent < 0.3; ++r) {
    const double t0 = now_s();
    fn();
    const double t = now_s() - t0;
    best = std::min(best, t);
    spent += t;
  }
  return best;
}

// ---- kernels ------------------------------------------------------------------

int run_kernels(const Args& args) {
  bool as_json = false, no_blas = false;
  int64_t threads = 0, repeats = 5;
  FlagParser p("dgemma bench kernels [--json] [-t N]",
               "GEMM kernels at the shapes of the 26B-A4B model (canvas M=256, K=2816, N=2816/2112/4096; one\n"
               "expert M=16) in both CPU modes (fma: fp32 FMA on bf16 weights; dot: vdpbf16ps, activations\n"
               "rounded to bf16, AVX512_BF16 only), against OpenBLAS cblas_sgemm on the same (widened) weights\n"
               "when libopenblas can be opened (else the scalar reference kernel), measured in the same run,\n"
               "and the peak FLOP rate of the machine. --json: one object per line (name, gflops,\n"
               "baseline, baseline_gflops, peak_gflops, threads; GEMM lines also m, n, k, weight_dtype, mode).");
  p.add_bool("--json", &as_json, "one JSON object per line");
  p.add_int("-t,--threads", &threads, "threads (0 = all cores)");
  p.add_int("--repeats", &repeats, "timed runs per kernel (best kept)");
  p.add_bool("--no-blas", &no_blas, "compare with the scalar reference kernel even if OpenBLAS is installed");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw Error("bench kernels: unexpected argument '" + p.positional()[0] + "'");
  const int nt = threads > 0 ? int(threads) : int(std::max(1u, std::thread::hardware_concurrency()));
  const CpuIsa isa = default_isa();
  const cpu::PeakRates pk = cpu::measure_peak(isa, nt);
  for (const auto& [name, rate] :
       {std::pair<const char*, double>{"peak_fma", pk.fma_gflops}, {"peak_dot", pk.dot_gflops}}) {
    if (rate <= 0) continue;
    json::Value v = json::Object{};
    v.set("name", name);
    v.set("gflops", rate);
    v.set("baseline", "none");
    v.set("baseline_gflops", 0.0);
    v.set("peak_gflops", rate);
    v.set("threads", nt);
    v.set("isa", std::string(isa_name(isa)));
    emit(as_json, v,
         std::string(name) + ": " + fmt("%.1f", rate) + " GFLOP/s (" + std::string(isa_name(isa)) + ", " +
             std::to_string(nt) + " threads)");
  }
  struct Shape {
    const char* name;
    int64_t m, k, n;
  };
  const Shape shapes[] = {{"linear_canvas_h2816", 256, 2816, 2816},
                          {"linear_canvas_mlp2112", 256, 2816, 2112},
                          {"linear_canvas_q4096", 256, 2816, 4096},
                          {"expert_gate_up", 16, 2816, 1408},
                          {"expert_down", 16, 704, 2816}};
  // Baseline: OpenBLAS cblas_sgemm on fp32 copies of the weights when the
  // library can be opened, else the scalar reference kernel.
  const std::unique_ptr<cpu::BlasBaseline> blas = no_blas ? nullptr : cpu::BlasBaseline::open();
  if (blas) blas->set_threads(nt);
  if (!as_json)
    std::printf("baseline: %s\n",
                blas ? ("OpenBLAS cblas_sgemm (" + blas->library() + ", " + blas->config() + ")").c_str()
                     : "the scalar reference kernel (no OpenBLAS found)");
  CpuBackendOptions ro;
  ro.threads = nt;
  ro.isa = CpuIsa::kScalar;
  CpuBackend reference(ro);
  for (const Shape& s : shapes) {
    std::vector<float> xf(size_t(s.m * s.k)), wf(size_t(s.n * s.k));
    fill(xf, 1.0f, 1);
    fill(wf, 0.05f, 2);
    std::vector<uint16_t> wb(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
    Tensor x = Tensor::f32({s.m, s.k}), out;
    x.f = xf;
    WeightRef w;
    w.name = std::string(s.name);
    w.dtype = DType::kBF16;
    w.shape = {s.n, s.k};
    w.data = wb.data();
    OpCall c;
    c.kind = OpKind::kLinear;
    c.in = {&x};
    c.w = {&w};
    c.out = {&out};
    prepare_op(c);
    const double flop = cpu::op_flops(c);
    double t_ref = 0;
    if (blas) {
      std::vector<float> wr(wb.size()), cblas(size_t(s.m * s.n));  // the bf16 weights, widened
      for (size_t i = 0; i < wb.size(); ++i) wr[i] = bf16_to_f32(wb[i]);
      t_ref = best_time(int(repeats), [&] { blas->sgemm_nt(s.m, s.n, s.k, xf.data(), wr.data(), cblas.data()); });
    } else {
      t_ref = cpu::time_op(reference, c, 1);
    }
    const std::string base = blas ? "openblas_sgemm" : "reference";
    for (bool dot : {false, true}) {
      CpuBackendOptions o;
      o.threads = nt;
      o.bf16_dot = dot;
      CpuBackend b(o);
      if (dot && !b.bf16_dot()) continue;
      const double t = cpu::time_op(b, c, int(repeats));
      const double gf = flop / t / 1e9, peak = dot ? pk.dot_gflops : pk.fma_gflops;
      json::Value v = json::Object{};
      v.set("name", std::string(s.name) + (dot ? "_dot" : "_fma"));
      v.set("gflops", gf);
      v.set("baseline", base);
      v.set("baseline_gflops", flop / t_ref / 1e9);
      v.set("peak_gflops", peak);
      v.set("threads", nt);
      v.set("m", s.m);
      v.set("n", s.n);
      v.set("k", s.k);
      v.set("weight_dtype", "BF16");
      v.set("mode", dot ? "dot" : "fma");
      v.set("isa", std::string(isa_name(b.isa())));
      emit(as_json, v,
           std::string(s.name) + (dot ? " dot" : " fma") + "  M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) +
               " N=" + std::to_string(s.n) + ": " + fmt("%.1f", gf) + " GFLOP/s, " + fmt("%.2f", t_ref / t) + "x " +
               base + " (" + fmt("%.2f", flop / t_ref / 1e9) + "), " + fmt("%.0f", peak > 0 ? 100 * gf / peak : 0) +
               "% of " + (dot ? "dot" : "fma") + " peak");
    }
  }
  return 0;
}

// ---- step -----------------------------------------------------------------------

int run_step(const Args& args) {
  ModelFlags mf;
  bool as_json = false, dot = false;
  int64_t context = 512, steps = 3, estimate_layers = 30, batch = 1;
  std::string isa_text;
  FlagParser p(
      "dgemma bench step -m DIR [--json] [-t N] [--context N] [--steps N] [--batch N] [--bf16-dot] "
      "[--backend NAME]",
      "Times denoising steps of a checkpoint after a --context-token prompt: the first step (no\n"
      "self-conditioning), self-conditioned steps, and the encoder commit of a canvas. Reports canvas\n"
      "positions/s, seconds, FLOP (op vocabulary, exact per call), the time split by op, and estimated\n"
      "tokens/s at 16 and 48 steps per canvas (256 tokens / (first + (S-1)·self-conditioned step +\n"
      "commit)). For a checkpoint with fewer layers than --estimate-layers (e.g. `dgemma bench slice`),\n"
      "also an estimate for that many. On the CPU backend (the default) also the threads, ISA, mode\n"
      "and the fraction of the measured peak FLOP rate; with --backend (e.g. cuda, cuda:sync) the steps\n"
      "run on that backend, and those CPU-only figures are left out (--bf16-dot and --isa are errors).\n"
      "--batch N also times batched self-conditioned steps: one decoder pass over N canvases, each\n"
      "with its own copy of the prompt's KV cache (as `serve` batches concurrent requests).\n"
      "The JSON names the backend in \"backend\".");
  mf.add_to(p);
  p.add_bool("--json", &as_json, "one JSON object");
  p.add_int("--context", &context, "prompt tokens encoded before the steps");
  p.add_int("--steps", &steps, "timed self-conditioned steps (best kept)");
  p.add_int("--batch", &batch, "also time batched steps over this many canvases (1: none)");
  p.add_bool("--bf16-dot", &dot, "bf16 weights use vdpbf16ps (activations rounded to bf16); CPU backend only");
  p.add_string("--isa", &isa_text, "cap the dispatch level: scalar, avx2, avx512, avx512bf16, amx; CPU backend only",
               "LEVEL");
  p.add_int("--estimate-layers", &estimate_layers, "layer count for the full-model estimate");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw Error("bench step: unexpected argument '" + p.positional()[0] + "'");
  if (context < 1 || steps < 1) throw Error("bench step: --context and --steps must be >= 1");
  if (batch < 1) throw Error("bench step: --batch must be >= 1");
  // The CPU backend (the default) is built here with the CPU-only options;
  // any other backend is the one ModelFlags::load() put on the model.
  const bool on_cpu = mf.backend == "cpu";
  if (!on_cpu && dot)
    throw Error("bench step: --bf16-dot is a mode of the CPU backend; it cannot be combined with --backend " +
                mf.backend);
  if (!on_cpu && !isa_text.empty())
    throw Error("bench step: --isa caps the CPU backend's dispatch level; it cannot be combined with --backend " +
                mf.backend);
  CpuBackendOptions o;
  o.threads = int(mf.threads);
  o.bf16_dot = dot || mf.precision == "bf16-dot" || mf.precision == "int8-dot";  // the same switches as on run
  o.int8_dot = mf.precision == "int8-dot";
  if (!isa_text.empty()) {
    auto l = parse_isa(isa_text);
    if (!l) throw Error("--isa: expected scalar, avx2, avx512, avx512bf16 or amx, got '" + isa_text + "'");
    o.isa = *l;
  }
  const double t_start = now_s();
  auto model = mf.load();
  const double t_load = now_s() - t_start;  // mapping, conversion, quantization at load
  std::unique_ptr<CpuBackend> cpu_backend;  // set on the CPU only
  if (on_cpu) {
    cpu_backend = std::make_unique<CpuBackend>(o);
    model->set_backend(*cpu_backend);
  }
  const std::string backend_name = model->executor().backend().name();
  const int64_t L = model->canvas_length(), V = model->vocab_size(), layers = model->config().num_layers;
  std::vector<int32_t> prompt(static_cast<size_t>(context));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 2) % size_t(V));
  prompt[0] = 2;
  const double t_load0 = now_s();
  model->encode(prompt);
  const double t_prefill = now_s() - t_load0;  // includes packing the weights
  const int64_t P = model->cache_length();
  std::vector<int32_t> canvas(static_cast<size_t>(L));
  for (size_t i = 0; i < canvas.size(); ++i) canvas[i] = int32_t((i * 104729 + 17) % size_t(V));
  std::vector<float> first(size_t(L * V)), logits(size_t(L * V));
  // Warm-up of both step kinds: packs the LM head and self-conditioning
  // weights and faults in every mapped page (the soft embedding reads the
  // whole table), so that the profiled passes below are steady-state.
  model->decode(canvas.data(), nullptr, first.data());
  model->decode(canvas.data(), first.data(), logits.data());
  // A backend with device memory of its own (it counts its bus traffic):
  // its steps run as generate() runs them, and its ops are timed on the
  // device (Backend::set_profiling).
  Backend& backend = model->executor().backend();
  const bool on_device = backend.device_traffic().has_value();
  // On a device the steps are timed as generate() runs them: decode_sample,
  // where only O(canvas) values cross the bus and the processed logits stay
  // for the next step's self-conditioning (decode() through the host API,
  // which moves the [L, V] logits both ways, is timed apart).
  std::vector<double> uniforms(static_cast<size_t>(L));
  for (size_t i = 0; i < uniforms.size(); ++i) uniforms[i] = double(i * 7 % 97) / 97.0;
  RowSamples sampled;
  const bool device_steps = on_device;
  auto step_first = [&] {
    if (device_steps)
      model->decode_sample(canvas.data(), false, 1.0f, uniforms.data(), sampled);
    else
      model->decode(canvas.data(), nullptr, logits.data());
  };
  auto step_sc = [&] {
    if (device_steps)
      model->decode_sample(canvas.data(), true, 1.0f, uniforms.data(), sampled);
    else
      model->decode(canvas.data(), first.data(), logits.data());
  };
  if (device_steps) {
    step_first();  // the sampler's buffers, and z for the first self-conditioned step
    step_sc();
  }
  // Profiled passes: FLOP and per-op time (an observer sees every op on the
  // host: on a device the per-op times are then replaced by the device's own,
  // measured with events on a pass without observer, below).
  cpu::OpProfile prof_first, prof_sc, prof_commit;
  model->set_observer(&prof_first);
  prof_first.reset();
  double t0 = now_s();
  model->decode(canvas.data(), nullptr, logits.data());
  double t_first = device_steps ? 1e30 : now_s() - t0;
  model->set_observer(&prof_sc);
  prof_sc.reset();
  model->decode(canvas.data(), first.data(), logits.data());
  model->set_observer(nullptr);
  if (device_steps) step_first();  // z again (the observed passes above were host-API passes)
  double t_sc = 1e30;
  for (int64_t s = 0; s < steps; ++s) {
    t0 = now_s();
    step_sc();
    t_sc = std::min(t_sc, now_s() - t0);
  }
  t0 = now_s();
  step_first();
  t_first = std::min(t_first, now_s() - t0);
  double t_sc_host_api = 0;
  if (device_steps) {
    t_sc_host_api = 1e30;
    for (int64_t s = 0; s < steps; ++s) {
      t0 = now_s();
      model->decode(canvas.data(), first.data(), logits.data());
      t_sc_host_api = std::min(t_sc_host_api, now_s() - t0);
    }
  }
  // The device's own time per op (events on its stream) for the profiles.
  auto device_profile = [&](cpu::OpProfile& prof, const std::function<void()>& pass) {
    backend.set_profiling(true);
    pass();
    const std::vector<OpDeviceTime> times = backend.take_profile();
    backend.set_profiling(false);
    prof.clear_seconds();
    for (const OpDeviceTime& t : times) prof.add_seconds(t.kind, t.layer >= 0, t.seconds);
  };
  if (on_device) {
    step_first();
    device_profile(prof_sc, step_sc);
    device_profile(prof_first, step_first);
  }
  // Batched self-conditioned steps (as `serve` batches concurrent requests): N canvases in one
  // pass, each against its own copy of the cache; warmed up once (the
  // workspace grows to N canvases), best of --steps. On a device each
  // canvas runs its sampler pass in the batch and keeps its z there, as
  // `serve` runs concurrent requests; on the CPU, as the single steps above,
  // the logits come back through the host API.
  double t_batch = 0, t_batch_device = 0;
  if (batch > 1) {
    std::vector<KvCache> caches(static_cast<size_t>(batch), model->cache());
    std::vector<std::vector<float>> outs(static_cast<size_t>(device_steps ? 0 : batch),
                                         std::vector<float>(static_cast<size_t>(L * V)));
    std::vector<Tensor> z(static_cast<size_t>(batch));
    std::vector<RowSamples> samples(static_cast<size_t>(batch));
    std::vector<DecodeItem> items(static_cast<size_t>(batch));
    for (size_t i = 0; i < items.size(); ++i) {
      items[i].cache = &caches[i];
      items[i].canvas = canvas.data();
      if (device_steps) {
        items[i].samples = &samples[i];
        items[i].z = &z[i];
        items[i].uniforms = uniforms.data();
      } else {
        items[i].self_conditioning = first.data();
        items[i].logits = outs[i].data();
      }
    }
    model->decode_batch(items);  // on a device: each canvas's first z
    for (DecodeItem& it : items) it.z_self_conditioning = device_steps;
    t_batch = 1e30;
    for (int64_t s = 0; s < steps; ++s) {
      t0 = now_s();
      model->decode_batch(items);
      t_batch = std::min(t_batch, now_s() - t0);
    }
    if (on_device) {
      backend.set_profiling(true);
      model->decode_batch(items);
      for (const OpDeviceTime& t : backend.take_profile()) t_batch_device += t.seconds;
      backend.set_profiling(false);
    }
  }
  // Commits are timed from the same cache each time: a copy is put back
  // (truncate_cache cannot undo a sliding layer's evictions).
  std::vector<int32_t> commit(canvas.begin(), canvas.end());
  const KvCache before_commit = model->cache();
  auto restore = [&] {
    KvCache c = before_commit;
    model->swap_cache(c);
  };
  model->set_observer(&prof_commit);
  prof_commit.reset();
  t0 = now_s();
  model->encode(commit);
  double t_commit = now_s() - t0;
  model->set_observer(nullptr);
  restore();
  t0 = now_s();
  model->encode(commit);
  t_commit = std::min(t_commit, now_s() - t0);
  restore();
  if (on_device) {
    device_profile(prof_commit, [&] { model->encode(commit); });
    restore();
  }

  // What one self-conditioned step moves between host and device, counted
  // by the CUDA backend itself (Backend::device_traffic), per way of running it.
  struct Traffic {
    std::string path;
    int64_t h2d = 0, d2h = 0, syncs = 0, launches = 0, graphs = 0;
  };
  std::vector<Traffic> traffic;
  if (on_device) {
    auto count = [&](const std::string& path, const std::function<void()>& step) {
      backend.reset_traffic();
      step();
      const DeviceTraffic t = *backend.device_traffic();
      traffic.push_back({path, t.h2d_bytes, t.d2h_bytes, t.synchronizations, t.kernel_launches, t.graph_launches});
    };
    // Through the host API: the logits come down and go back up.
    count("host_logits", [&] { model->decode(canvas.data(), first.data(), logits.data()); });
    // As generate() runs a step: the sample op where the logits are, only
    // O(canvas) values to the host, z kept for the next step (docs/model.md §3.3).
    step_first();
    count("on_device_sampler", step_sc);
  }

  // The peak FLOP rate is measured for the CPU only (its register loops say
  // nothing about another backend).
  std::optional<double> peak;
  if (cpu_backend) {
    const cpu::PeakRates pk = cpu::measure_peak(cpu_backend->isa(), cpu_backend->pool().size());
    peak = cpu_backend->bf16_dot() ? pk.dot_gflops : pk.fma_gflops;
  }
  const double flop_sc = prof_sc.total_flops(), flop_first = prof_first.total_flops(),
               flop_commit = prof_commit.total_flops();
  auto tokens_per_s = [&](double first_s, double sc_s, double commit_s, int n) {
    return double(L) / (first_s + double(n - 1) * sc_s + commit_s);
  };
  // Per-layer share of the self-conditioned step (ops inside layers) for the
  // full-model estimate; model-level ops (embeddings, LM head, soft-cap,
  // self-conditioning MLP) are charged once.
  const double layer_share = prof_sc.layer_seconds() / std::max(1e-12, prof_sc.total_seconds());
  const double layer_share_first = prof_first.layer_seconds() / std::max(1e-12, prof_first.total_seconds());
  const double commit_layer_share = prof_commit.layer_seconds() / std::max(1e-12, prof_commit.total_seconds());
  const double scale = double(estimate_layers) / double(layers);
  auto est = [&](double t, double share) { return t * (1 - share) + t * share * scale; };
  const double e_first = est(t_first, layer_share_first), e_sc = est(t_sc, layer_share),
               e_commit = est(t_commit, commit_layer_share);

  json::Value v = json::Object{};
  v.set("name", "step");
  v.set("model", mf.model_dir);
  v.set("backend", backend_name);
  v.set("layers", layers);
  if (cpu_backend) {
    v.set("threads", cpu_backend->pool().size());
    v.set("isa", std::string(isa_name(cpu_backend->isa())));
    v.set("mode", cpu_backend->bf16_dot() ? "dot" : "fma");
    v.set("int8_dot", cpu_backend->int8_dot());
  }
  v.set("precision", mf.precision);
  v.set("quantize", mf.quantize.empty() ? std::string("none") : mf.quantize);
  v.set("load_s", t_load);
  v.set("context", P);
  v.set("canvas", L);
  v.set("prefill_s_incl_packing", t_prefill);
  v.set("step_first_s", t_first);
  v.set("step_sc_s", t_sc);
  v.set("commit_s", t_commit);
  v.set("positions_per_s", double(L) / t_sc);
  // What the step timings ran: decode() (the host API) on the CPU,
  // decode_sample() (generate()'s path) on a device, whose host-API step is
  // step_sc_host_api_s.
  v.set("step_path", device_steps ? "decode_sample" : "decode");
  if (device_steps) v.set("step_sc_host_api_s", t_sc_host_api);
  if (batch > 1) {
    v.set("batch", batch);
    v.set("batch_step_sc_s", t_batch);
    v.set("batch_positions_per_s", double(batch * L) / t_batch);
    v.set("batch_speedup", double(batch) * t_sc / t_batch);
    if (device_steps) {
      v.set("batch_device_s", t_batch_device);
      v.set("batch_device_speedup", double(batch) * prof_sc.total_seconds() / std::max(1e-12, t_batch_device));
    }
  }
  // A device's busy time for one self-conditioned step (the sum of its ops'
  // event times): the step time less the host's share.
  if (device_steps) v.set("step_sc_device_s", prof_sc.total_seconds());
  v.set("step_sc_flop", flop_sc);
  v.set("step_first_flop", flop_first);
  v.set("commit_flop", flop_commit);
  v.set("gflops", flop_sc / t_sc / 1e9);
  if (peak) {
    v.set("peak_gflops", *peak);
    v.set("fraction_of_peak", *peak > 0 ? flop_sc / t_sc / 1e9 / *peak : 0.0);
  }
  v.set("tokens_per_s_16_steps", tokens_per_s(t_first, t_sc, t_commit, 16));
  v.set("tokens_per_s_48_steps", tokens_per_s(t_first, t_sc, t_commit, 48));
  json::Value split = json::Object{};
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = OpKind(k);
    if (prof_sc.seconds(kind) <= 0) continue;
    json::Value e = json::Object{};
    e.set("seconds", prof_sc.seconds(kind));
    e.set("gflop", prof_sc.flops(kind) / 1e9);
    split.set(std::string(op_name(kind)), e);
  }
  v.set("step_sc_by_op", split);
  if (!traffic.empty()) {
    json::Value all = json::Object{};
    for (const Traffic& t : traffic) {
      json::Value e = json::Object{};
      e.set("h2d_bytes", t.h2d);
      e.set("d2h_bytes", t.d2h);
      e.set("synchronizations", t.syncs);
      e.set("kernel_launches", t.launches);
      e.set("graph_launches", t.graphs);
      e.set("h2d_bytes_per_position", double(t.h2d) / double(L));
      e.set("d2h_bytes_per_position", double(t.d2h) / double(L));
      all.set(t.path, e);
    }
    v.set("device_traffic_per_step", all);
  }
  if (cpu_backend) {
    // What the sparse self-conditioning did over every pass above.
    const SoftEmbeddingStats st = cpu_backend->soft_embedding_stats();
    json::Value se = json::Object{};
    se.set("rows_sparse", st.rows_sparse);
    se.set("rows_dense", st.rows_dense);
    se.set("kept_per_sparse_row", st.rows_sparse ? double(st.kept_entries) / double(st.rows_sparse) : 0.0);
    se.set("kept_max", st.kept_max);
    v.set("soft_embedding", se);
  }
  if (layers != estimate_layers) {
    json::Value e = json::Object{};
    e.set("layers", estimate_layers);
    e.set("step_first_s", e_first);
    e.set("step_sc_s", e_sc);
    e.set("commit_s", e_commit);
    e.set("positions_per_s", double(L) / e_sc);
    e.set("tokens_per_s_16_steps", tokens_per_s(e_first, e_sc, e_commit, 16));
    e.set("tokens_per_s_48_steps", tokens_per_s(e_first, e_sc, e_commit, 48));
    v.set("estimate", e);
  }
  if (as_json) {
    std::printf("%s\n", json::dump(v).c_str());
    return 0;
  }
  if (cpu_backend)
    std::printf("model %s: %lld layers, canvas %lld, context %lld; %d threads, %s, mode %s%s\n", mf.model_dir.c_str(),
                (long long)layers, (long long)L, (long long)P, cpu_backend->pool().size(),
                std::string(isa_name(cpu_backend->isa())).c_str(),
                cpu_backend->bf16_dot() ? "dot (bf16 activations)" : "fma",
                cpu_backend->int8_dot() ? ", quantized weights on int8 activations (int8-dot)" : "");
  else
    std::printf("model %s: %lld layers, canvas %lld, context %lld; backend %s\n", mf.model_dir.c_str(),
                (long long)layers, (long long)L, (long long)P, backend_name.c_str());
  std::printf("load: %.2f s (precision %s, quantize %s)\n", t_load, mf.precision.c_str(),
              mf.quantize.empty() ? "none" : mf.quantize.c_str());
  std::printf("prefill of %lld tokens (incl. weight %s): %.2f s\n", (long long)context,
              cpu_backend ? "packing" : "preparation", t_prefill);
  std::printf("step (first, no self-conditioning): %.3f s, %.1f GFLOP, %.1f GFLOP/s\n", t_first, flop_first / 1e9,
              flop_first / t_first / 1e9);
  if (peak)
    std::printf("step (self-conditioned):            %.3f s, %.1f GFLOP, %.1f GFLOP/s = %.0f%% of the %s peak (%.0f)\n",
                t_sc, flop_sc / 1e9, flop_sc / t_sc / 1e9, *peak > 0 ? 100 * flop_sc / t_sc / 1e9 / *peak : 0.0,
                cpu_backend->bf16_dot() ? "dot" : "fma", *peak);
  else
    std::printf("step (self-conditioned):            %.3f s, %.1f GFLOP, %.1f GFLOP/s\n", t_sc, flop_sc / 1e9,
                flop_sc / t_sc / 1e9);
  std::printf("canvas positions/s: %.1f\n", double(L) / t_sc);
  if (device_steps)
    std::printf(
        "steps timed as generate() runs them (decode_sample); device busy time of the self-conditioned "
        "step %.4f s; through the host API (logits down and up) %.4f s\n",
        prof_sc.total_seconds(), t_sc_host_api);
  if (batch > 1)
    std::printf(
        "batched step (%lld self-conditioned canvases in one pass): %.3f s, %.1f canvas positions/s "
        "(%.2fx one canvas per pass)\n",
        (long long)batch, t_batch, double(batch * L) / t_batch, double(batch) * t_sc / t_batch);
  if (batch > 1 && device_steps)
    std::printf("batched pass device busy time %.4f s (%.2fx one canvas's)\n", t_batch_device,
                double(batch) * prof_sc.total_seconds() / std::max(1e-12, t_batch_device));
  std::printf("commit (encoder, %lld tokens): %.3f s, %.1f GFLOP\n", (long long)L, t_commit, flop_commit / 1e9);
  std::printf("estimated tokens/s: %.2f at 16 steps, %.2f at 48 steps\n", tokens_per_s(t_first, t_sc, t_commit, 16),
              tokens_per_s(t_first, t_sc, t_commit, 48));
  for (const Traffic& t : traffic)
    std::printf(
        "device traffic of one self-conditioned step (%s): %lld bytes up, %lld bytes down (%.1f / %.1f per "
        "canvas position), %lld waits, %lld launches in %lld graphs\n",
        t.path.c_str(), (long long)t.h2d, (long long)t.d2h, double(t.h2d) / double(L), double(t.d2h) / double(L),
        (long long)t.syncs, (long long)t.launches, (long long)t.graphs);
  std::printf("self-conditioned step by op:\n");
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = OpKind(k);
    if (prof_sc.seconds(kind) <= 0) continue;
    const double s = prof_sc.seconds(kind), f = prof_sc.flops(kind);
    std::printf("  %-15s %7.3f s  %6.1f%%  %8.1f GFLOP  %7.1f GFLOP/s\n", std::string(op_name(kind)).c_str(), s,
                100 * s / prof_sc.total_seconds(), f / 1e9, f > 0 ? f / s / 1e9 : 0.0);
  }
  if (layers != estimate_layers)
    std::printf(
        "estimate for %lld layers (layer ops scaled, model-level ops once): step %.2f s (first %.2f s), "
        "commit %.2f s, %.1f positions/s, %.2f tokens/s at 16 steps, %.2f at 48\n",
        (long long)estimate_layers, e_sc, e_first, e_commit, double(L) / e_sc,
        tokens_per_s(e_first, e_sc, e_commit, 16), tokens_per_s(e_first, e_sc, e_commit, 48));
  return 0;
}

// ---- slice ----------------------------------------------------------------------

int run_slice(const Args& args) {
  std::string out;
  int64_t layers = 2;
  FlagParser p("dgemma bench slice -o DIR [--layers N]",
               "Writes a synthetic checkpoint with the real 26B-A4B dimensions (docs/model.md §1.1) cut to N layers\n"
               "(sliding ..., last one full) and random bf16 weights, for `dgemma bench step` (2 layers: 4.7 GB).");
  p.add_string("-o,--out", &out, "output folder", "DIR");
  p.add_int("--layers", &layers, "number of layers");
  if (!p.parse(args)) return 0;
  if (out.empty()) throw Error("bench slice: give -o DIR");
  if (layers < 1 || layers > 30) throw Error("bench slice: --layers must be in [1, 30], got " + std::to_string(layers));
  const double t0 = now_s();
  ensure_model_slice(out, int(layers));
  std::fprintf(stderr, "slice with %lld layers in %s (%.1f s)\n", (long long)layers, out.c_str(), now_s() - t0);
  return 0;
}

int run_bench(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf(
        "usage: dgemma bench kernels|step|slice [options]   (dgemma bench <what> --help)\n"
        "       dgemma bench -m DIR [step options]            (= dgemma bench step -m DIR)\n"
        "  kernels  GEMM kernels vs OpenBLAS sgemm (or the scalar reference) and the machine peak\n"
        "  step     denoising-step and commit speed of a checkpoint (-m DIR; --backend cpu|cuda|...)\n"
        "  slice    write a synthetic real-size checkpoint slice for `step`\n");
    return args.empty() ? 2 : 0;
  }
  // `dgemma bench -m DIR ...`: the step benchmark, the one users run on
  // their checkpoint.
  if (args[0] == "-m" || args[0] == "--model" || args[0].rfind("--model=", 0) == 0) return run_step(args);
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "kernels") return run_kernels(rest);
  if (args[0] == "step") return run_step(rest);
  if (args[0] == "slice") return run_slice(rest);
  throw Error("bench: unknown benchmark '" + args[0] + "' (expected kernels, step or slice)");
}

const Subcommand kBench("bench", "speed: CPU kernels vs reference and peak, denoising steps (any backend), slices",
                        run_bench);

}  // namespace
}  // namespace dgemma::cli

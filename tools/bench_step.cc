// dgemma bench step -m DIR [--json] [-t N] [--context N] [--steps N] [--batch N] [--bf16-dot] [--backend NAME]
//
// The speed of whole denoising steps of a checkpoint, on the CPU or on any
// other backend (--backend, e.g. cuda): set up the model and its backend,
// time each case (single steps, device profiles, batched steps, commits,
// device traffic), then report them as JSON or text.
#include "bench_step.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include "bench_clock.h"
#include "core/cpu_features.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "flags.h"
#include "model/diffusion_gemma.h"
#include "model_flags.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_bench.h"

namespace dgemma::cli {
namespace {

// ---- set-up -----------------------------------------------------------------------

struct StepFlags {
  ModelFlags mf;
  bool as_json = false, dot = false;
  int64_t context = 512, steps = 3, estimate_layers = 30, batch = 1;
  std::string isa_text;
};

// Parses and checks the flags; false when only the help was asked for.
bool parse_step_flags(const Args& args, StepFlags& f) {
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
  f.mf.add_to(p);
  p.add_bool("--json", &f.as_json, "one JSON object");
  p.add_int("--context", &f.context, "prompt tokens encoded before the steps", 1);
  p.add_int("--steps", &f.steps, "timed self-conditioned steps (best kept)", 1);
  p.add_int("--batch", &f.batch, "also time batched steps over this many canvases (1: none)", 1);
  p.add_bool("--bf16-dot", &f.dot, "bf16 weights use vdpbf16ps (activations rounded to bf16); CPU backend only");
  p.add_string("--isa", &f.isa_text, "cap the dispatch level: scalar, avx2, avx512, avx512bf16, amx; CPU backend only",
               "LEVEL");
  p.add_int("--estimate-layers", &f.estimate_layers, "layer count for the full-model estimate");
  if (!p.parse(args)) return false;
  if (!p.positional().empty()) throw UsageError("bench step: unexpected argument '" + p.positional()[0] + "'");
  const bool on_cpu = f.mf.backend == "cpu";
  if (!on_cpu && f.dot)
    throw UsageError("bench step: --bf16-dot is a mode of the CPU backend; it cannot be combined with --backend " +
                     f.mf.backend);
  if (!on_cpu && !f.isa_text.empty())
    throw UsageError("bench step: --isa caps the CPU backend's dispatch level; it cannot be combined with --backend " +
                     f.mf.backend);
  return true;
}

// The CPU backend's options: the same switches as on `run`, and --isa.
CpuBackendOptions cpu_options(const StepFlags& f) {
  CpuBackendOptions o;
  o.threads = int(f.mf.threads);
  o.bf16_dot = f.dot || f.mf.precision == "bf16-dot" || f.mf.precision == "int8-dot";
  o.int8_dot = f.mf.precision == "int8-dot";
  if (!f.isa_text.empty()) {
    auto l = parse_isa(f.isa_text);
    if (!l) throw Error("--isa: expected scalar, avx2, avx512, avx512bf16 or amx, got '" + f.isa_text + "'");
    o.isa = *l;
  }
  return o;
}

// The model on its backend, after the prompt's prefill.
struct LoadedModel {
  std::unique_ptr<DiffusionGemma> model;
  std::unique_ptr<CpuBackend> cpu_backend;  // set on the CPU only
  std::string backend_name;
  int64_t L = 0, V = 0, layers = 0;  // canvas length, vocabulary, layer count
  int64_t P = 0;                     // the prompt's cache length
  double t_load = 0;                 // mapping, conversion, quantization at load
  double t_prefill = 0;              // includes packing the weights
};

// The CPU backend (the default) is built here with the CPU-only options; any
// other backend is the one ModelFlags::load() put on the model.
LoadedModel load_and_prefill(const StepFlags& f) {
  const CpuBackendOptions o = cpu_options(f);
  LoadedModel m;
  const double t_start = now_s();
  m.model = f.mf.load();
  m.t_load = now_s() - t_start;
  if (f.mf.backend == "cpu") {
    m.cpu_backend = std::make_unique<CpuBackend>(o);
    m.model->set_backend(*m.cpu_backend);
  }
  m.backend_name = m.model->executor().backend().name();
  m.L = m.model->canvas_length();
  m.V = m.model->vocab_size();
  m.layers = m.model->config().num_layers;
  std::vector<int32_t> prompt(static_cast<size_t>(f.context));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 2) % size_t(m.V));
  prompt[0] = 2;
  const double t0 = now_s();
  m.model->encode(prompt);
  m.t_prefill = now_s() - t0;
  m.P = m.model->cache_length();
  return m;
}

// The canvas and buffers of the timed passes, and the two kinds of step.
// On a device the steps are timed as generate() runs them: decode_sample,
// where only O(canvas) values cross the bus and the processed logits stay
// for the next step's self-conditioning (decode() through the host API,
// which moves the [L, V] logits both ways, is timed apart).
struct StepRunner {
  StepRunner(DiffusionGemma& m, Backend& b) : model(m), backend(b) {}

  DiffusionGemma& model;
  Backend& backend;
  bool on_device = false;  // a backend with device memory of its own (it counts its bus traffic)
  std::vector<int32_t> canvas;
  std::vector<float> first, logits;  // the first step's logits feed the self-conditioned steps
  std::vector<double> uniforms;
  RowSamples sampled;

  void step_first() {
    if (on_device)
      model.decode_sample(canvas.data(), false, 1.0f, uniforms.data(), sampled);
    else
      model.decode(canvas.data(), nullptr, logits.data());
  }
  void step_sc() {
    if (on_device)
      model.decode_sample(canvas.data(), true, 1.0f, uniforms.data(), sampled);
    else
      model.decode(canvas.data(), first.data(), logits.data());
  }
  // A self-conditioned step through the host API, on any backend.
  void host_step_sc() { model.decode(canvas.data(), first.data(), logits.data()); }
};

// Warm-up of both step kinds: packs the LM head and self-conditioning
// weights and faults in every mapped page (the soft embedding reads the
// whole table), so that the profiled passes are steady-state.
void warm_up(StepRunner& r, int64_t L, int64_t V) {
  r.canvas.resize(static_cast<size_t>(L));
  for (size_t i = 0; i < r.canvas.size(); ++i) r.canvas[i] = int32_t((i * 104729 + 17) % size_t(V));
  r.first.resize(size_t(L * V));
  r.logits.resize(size_t(L * V));
  r.model.decode(r.canvas.data(), nullptr, r.first.data());
  r.model.decode(r.canvas.data(), r.first.data(), r.logits.data());
  // Its ops are timed on the device (Backend::set_profiling).
  r.on_device = r.backend.device_traffic().has_value();
  r.uniforms.resize(static_cast<size_t>(L));
  for (size_t i = 0; i < r.uniforms.size(); ++i) r.uniforms[i] = double(i * 7 % 97) / 97.0;
  if (r.on_device) {
    r.step_first();  // the sampler's buffers, and z for the first self-conditioned step
    r.step_sc();
  }
}

// ---- the measured cases -----------------------------------------------------------

// What one self-conditioned step moves between host and device, counted by
// the CUDA backend itself (Backend::device_traffic), per way of running it.
struct Traffic {
  std::string path;
  int64_t h2d = 0, d2h = 0, syncs = 0, launches = 0, graphs = 0;
};

struct StepTimes {
  double first = 0, sc = 0, sc_host_api = 0, commit = 0;
  double batch = 0, batch_device = 0;
  cpu::OpProfile prof_first, prof_sc, prof_commit;
  std::vector<Traffic> traffic;
};

// Single steps: the profiled passes (FLOP and per-op time: an observer sees
// every op on the host; on a device the per-op times are then replaced by
// the device's own, measured with events on a pass without observer), then
// the best of --steps.
void time_single_steps(StepRunner& r, int64_t steps, StepTimes& t) {
  DiffusionGemma& model = r.model;
  model.set_observer(&t.prof_first);
  t.prof_first.reset();
  double t0 = now_s();
  model.decode(r.canvas.data(), nullptr, r.logits.data());
  t.first = r.on_device ? 1e30 : now_s() - t0;
  model.set_observer(&t.prof_sc);
  t.prof_sc.reset();
  model.decode(r.canvas.data(), r.first.data(), r.logits.data());
  model.set_observer(nullptr);
  if (r.on_device) r.step_first();  // z again (the observed passes above were host-API passes)
  t.sc = 1e30;
  for (int64_t s = 0; s < steps; ++s) {
    t0 = now_s();
    r.step_sc();
    t.sc = std::min(t.sc, now_s() - t0);
  }
  t0 = now_s();
  r.step_first();
  t.first = std::min(t.first, now_s() - t0);
  if (r.on_device) {
    t.sc_host_api = 1e30;
    for (int64_t s = 0; s < steps; ++s) {
      t0 = now_s();
      r.host_step_sc();
      t.sc_host_api = std::min(t.sc_host_api, now_s() - t0);
    }
  }
}

// The device's own time per op (events on its stream) of one pass, in place
// of the host times in prof.
void device_profile(Backend& backend, cpu::OpProfile& prof, const std::function<void()>& pass) {
  backend.set_profiling(true);
  pass();
  const std::vector<OpDeviceTime> times = backend.take_profile();
  backend.set_profiling(false);
  prof.clear_seconds();
  for (const OpDeviceTime& t : times) prof.add_seconds(t.kind, t.layer >= 0, t.seconds);
}

// Batched self-conditioned steps (as `serve` batches concurrent requests): N
// canvases in one pass, each against its own copy of the cache; warmed up
// once (the workspace grows to N canvases), best of --steps. On a device
// each canvas runs its sampler pass in the batch and keeps its z there, as
// `serve` runs concurrent requests; on the CPU, as the single steps, the
// logits come back through the host API.
void time_batch(StepRunner& r, int64_t batch, int64_t steps, StepTimes& t) {
  DiffusionGemma& model = r.model;
  std::vector<KvCache> caches(static_cast<size_t>(batch), model.cache());
  std::vector<std::vector<float>> outs(static_cast<size_t>(r.on_device ? 0 : batch),
                                       std::vector<float>(r.logits.size()));  // [L, V] each
  std::vector<Tensor> z(static_cast<size_t>(batch));
  std::vector<RowSamples> samples(static_cast<size_t>(batch));
  std::vector<DecodeItem> items(static_cast<size_t>(batch));
  for (size_t i = 0; i < items.size(); ++i) {
    items[i].cache = &caches[i];
    items[i].canvas = r.canvas.data();
    if (r.on_device) {
      items[i].samples = &samples[i];
      items[i].z = &z[i];
      items[i].uniforms = r.uniforms.data();
    } else {
      items[i].self_conditioning = r.first.data();
      items[i].logits = outs[i].data();
    }
  }
  model.decode_batch(items);  // on a device: each canvas's first z
  for (DecodeItem& it : items) it.z_self_conditioning = r.on_device;
  t.batch = 1e30;
  for (int64_t s = 0; s < steps; ++s) {
    const double t0 = now_s();
    model.decode_batch(items);
    t.batch = std::min(t.batch, now_s() - t0);
  }
  if (r.on_device) {
    r.backend.set_profiling(true);
    model.decode_batch(items);
    for (const OpDeviceTime& d : r.backend.take_profile()) t.batch_device += d.seconds;
    r.backend.set_profiling(false);
  }
}

// Commits are timed from the same cache each time: a copy is put back
// (truncate_cache cannot undo a sliding layer's evictions).
void time_commit(StepRunner& r, StepTimes& t) {
  DiffusionGemma& model = r.model;
  std::vector<int32_t> commit(r.canvas.begin(), r.canvas.end());
  const KvCache before_commit = model.cache();
  auto restore = [&] {
    KvCache c = before_commit;
    model.swap_cache(c);
  };
  model.set_observer(&t.prof_commit);
  t.prof_commit.reset();
  double t0 = now_s();
  model.encode(commit);
  t.commit = now_s() - t0;
  model.set_observer(nullptr);
  restore();
  t0 = now_s();
  model.encode(commit);
  t.commit = std::min(t.commit, now_s() - t0);
  restore();
  if (r.on_device) {
    device_profile(r.backend, t.prof_commit, [&] { model.encode(commit); });
    restore();
  }
}

// The bus traffic of one self-conditioned step on a device, per way of
// running it.
std::vector<Traffic> count_traffic(StepRunner& r) {
  std::vector<Traffic> traffic;
  auto count = [&](const std::string& path, const std::function<void()>& step) {
    r.backend.reset_traffic();
    step();
    const DeviceTraffic t = *r.backend.device_traffic();
    traffic.push_back({path, t.h2d_bytes, t.d2h_bytes, t.synchronizations, t.kernel_launches, t.graph_launches});
  };
  // Through the host API: the logits come down and go back up.
  count("host_logits", [&] { r.host_step_sc(); });
  // As generate() runs a step: the sample op where the logits are, only
  // O(canvas) values to the host, z kept for the next step (docs/model.md §3.3).
  r.step_first();
  count("on_device_sampler", [&] { r.step_sc(); });
  return traffic;
}

// Every case, in the order that leaves each one's state (cache, z) as the
// next one expects.
StepTimes measure(StepRunner& r, const StepFlags& f) {
  StepTimes t;
  time_single_steps(r, f.steps, t);
  if (r.on_device) {
    r.step_first();
    device_profile(r.backend, t.prof_sc, [&] { r.step_sc(); });
    device_profile(r.backend, t.prof_first, [&] { r.step_first(); });
  }
  if (f.batch > 1) time_batch(r, f.batch, f.steps, t);
  time_commit(r, t);
  if (r.on_device) t.traffic = count_traffic(r);
  return t;
}

// ---- results ----------------------------------------------------------------------

// Canvas tokens per second at n steps per canvas.
double tokens_per_s(int64_t L, double first_s, double sc_s, double commit_s, int n) {
  return double(L) / (first_s + double(n - 1) * sc_s + commit_s);
}

// The share of a pass's time spent in ops inside layers.
double layer_share(const cpu::OpProfile& prof) { return prof.layer_seconds() / std::max(1e-12, prof.total_seconds()); }

// What is derived from the times: the CPU's peak, the FLOP of each pass,
// and the times estimated for --estimate-layers layers.
struct Derived {
  std::optional<double> peak;  // measured for the CPU only (its register loops say nothing about another backend)
  double flop_sc = 0, flop_first = 0, flop_commit = 0;
  double e_first = 0, e_sc = 0, e_commit = 0;
};

// The full-model estimate scales the ops inside layers; model-level ops
// (embeddings, LM head, soft-cap, self-conditioning MLP) are charged once.
Derived derive(const StepFlags& f, const LoadedModel& m, const StepTimes& t) {
  Derived d;
  if (m.cpu_backend) {
    const cpu::PeakRates pk = cpu::measure_peak(m.cpu_backend->isa(), m.cpu_backend->pool().size());
    d.peak = m.cpu_backend->bf16_dot() ? pk.dot_gflops : pk.fma_gflops;
  }
  d.flop_sc = t.prof_sc.total_flops();
  d.flop_first = t.prof_first.total_flops();
  d.flop_commit = t.prof_commit.total_flops();
  const double scale = double(f.estimate_layers) / double(m.layers);
  auto est = [&](double time, double share) { return time * (1 - share) + time * share * scale; };
  d.e_first = est(t.first, layer_share(t.prof_first));
  d.e_sc = est(t.sc, layer_share(t.prof_sc));
  d.e_commit = est(t.commit, layer_share(t.prof_commit));
  return d;
}

json::Value traffic_json(const std::vector<Traffic>& traffic, int64_t L) {
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
  return all;
}

// What the sparse self-conditioning did over every pass.
json::Value soft_embedding_json(const CpuBackend& cpu) {
  const SoftEmbeddingStats st = cpu.soft_embedding_stats();
  json::Value se = json::Object{};
  se.set("rows_sparse", st.rows_sparse);
  se.set("rows_dense", st.rows_dense);
  se.set("kept_per_sparse_row", st.rows_sparse ? double(st.kept_entries) / double(st.rows_sparse) : 0.0);
  se.set("kept_max", st.kept_max);
  return se;
}

json::Value estimate_json(const StepFlags& f, const LoadedModel& m, const Derived& d) {
  json::Value e = json::Object{};
  e.set("layers", f.estimate_layers);
  e.set("step_first_s", d.e_first);
  e.set("step_sc_s", d.e_sc);
  e.set("commit_s", d.e_commit);
  e.set("positions_per_s", double(m.L) / d.e_sc);
  e.set("tokens_per_s_16_steps", tokens_per_s(m.L, d.e_first, d.e_sc, d.e_commit, 16));
  e.set("tokens_per_s_48_steps", tokens_per_s(m.L, d.e_first, d.e_sc, d.e_commit, 48));
  return e;
}

// The batched steps' figures, into v.
void set_batch_json(const StepFlags& f, const LoadedModel& m, const StepTimes& t, bool on_device, json::Value& v) {
  v.set("batch", f.batch);
  v.set("batch_step_sc_s", t.batch);
  v.set("batch_positions_per_s", double(f.batch * m.L) / t.batch);
  v.set("batch_speedup", double(f.batch) * t.sc / t.batch);
  if (on_device) {
    v.set("batch_device_s", t.batch_device);
    v.set("batch_device_speedup", double(f.batch) * t.prof_sc.total_seconds() / std::max(1e-12, t.batch_device));
  }
}

json::Value step_json(const StepFlags& f, const LoadedModel& m, const StepTimes& t, const Derived& d, bool on_device) {
  json::Value v = json::Object{};
  v.set("name", "step");
  v.set("model", f.mf.model_dir);
  v.set("backend", m.backend_name);
  v.set("layers", m.layers);
  if (m.cpu_backend) {
    v.set("threads", m.cpu_backend->pool().size());
    v.set("isa", std::string(isa_name(m.cpu_backend->isa())));
    v.set("mode", m.cpu_backend->bf16_dot() ? "dot" : "fma");
    v.set("int8_dot", m.cpu_backend->int8_dot());
  }
  v.set("precision", f.mf.precision);
  v.set("quantize", f.mf.quantize.empty() ? std::string("none") : f.mf.quantize);
  v.set("load_s", m.t_load);
  v.set("context", m.P);
  v.set("canvas", m.L);
  v.set("prefill_s_incl_packing", m.t_prefill);
  v.set("step_first_s", t.first);
  v.set("step_sc_s", t.sc);
  v.set("commit_s", t.commit);
  v.set("positions_per_s", double(m.L) / t.sc);
  // What the step timings ran: decode() (the host API) on the CPU,
  // decode_sample() (generate()'s path) on a device, whose host-API step is
  // step_sc_host_api_s.
  v.set("step_path", on_device ? "decode_sample" : "decode");
  if (on_device) v.set("step_sc_host_api_s", t.sc_host_api);
  if (f.batch > 1) set_batch_json(f, m, t, on_device, v);
  // A device's busy time for one self-conditioned step (the sum of its ops'
  // event times): the step time less the host's share.
  if (on_device) v.set("step_sc_device_s", t.prof_sc.total_seconds());
  v.set("step_sc_flop", d.flop_sc);
  v.set("step_first_flop", d.flop_first);
  v.set("commit_flop", d.flop_commit);
  v.set("gflops", d.flop_sc / t.sc / 1e9);
  if (d.peak) {
    v.set("peak_gflops", *d.peak);
    v.set("fraction_of_peak", *d.peak > 0 ? d.flop_sc / t.sc / 1e9 / *d.peak : 0.0);
  }
  v.set("tokens_per_s_16_steps", tokens_per_s(m.L, t.first, t.sc, t.commit, 16));
  v.set("tokens_per_s_48_steps", tokens_per_s(m.L, t.first, t.sc, t.commit, 48));
  v.set("step_sc_by_op", op_profile_json(t.prof_sc));
  if (!t.traffic.empty()) v.set("device_traffic_per_step", traffic_json(t.traffic, m.L));
  if (m.cpu_backend) v.set("soft_embedding", soft_embedding_json(*m.cpu_backend));
  if (m.layers != f.estimate_layers) v.set("estimate", estimate_json(f, m, d));
  return v;
}

// The model, its backend, the load and the prefill.
void print_setup(const StepFlags& f, const LoadedModel& m) {
  const long long layers = m.layers, L = m.L, P = m.P;
  if (m.cpu_backend)
    std::printf("model %s: %lld layers, canvas %lld, context %lld; %d threads, %s, mode %s%s\n", f.mf.model_dir.c_str(),
                layers, L, P, m.cpu_backend->pool().size(), std::string(isa_name(m.cpu_backend->isa())).c_str(),
                m.cpu_backend->bf16_dot() ? "dot (bf16 activations)" : "fma",
                m.cpu_backend->int8_dot() ? ", quantized weights on int8 activations (int8-dot)" : "");
  else
    std::printf("model %s: %lld layers, canvas %lld, context %lld; backend %s\n", f.mf.model_dir.c_str(), layers, L, P,
                m.backend_name.c_str());
  std::printf("load: %.2f s (precision %s, quantize %s)\n", m.t_load, f.mf.precision.c_str(),
              f.mf.quantize.empty() ? "none" : f.mf.quantize.c_str());
  std::printf("prefill of %lld tokens (incl. weight %s): %.2f s\n", (long long)f.context,
              m.cpu_backend ? "packing" : "preparation", m.t_prefill);
}

// The single, batched and commit timings and the estimated tokens/s.
void print_steps(const StepFlags& f, const LoadedModel& m, const StepTimes& t, const Derived& d, bool on_device) {
  const int64_t L = m.L;
  std::printf("step (first, no self-conditioning): %.3f s, %.1f GFLOP, %.1f GFLOP/s\n", t.first, d.flop_first / 1e9,
              d.flop_first / t.first / 1e9);
  if (d.peak)
    std::printf("step (self-conditioned):            %.3f s, %.1f GFLOP, %.1f GFLOP/s = %.0f%% of the %s peak (%.0f)\n",
                t.sc, d.flop_sc / 1e9, d.flop_sc / t.sc / 1e9,
                *d.peak > 0 ? 100 * d.flop_sc / t.sc / 1e9 / *d.peak : 0.0, m.cpu_backend->bf16_dot() ? "dot" : "fma",
                *d.peak);
  else
    std::printf("step (self-conditioned):            %.3f s, %.1f GFLOP, %.1f GFLOP/s\n", t.sc, d.flop_sc / 1e9,
                d.flop_sc / t.sc / 1e9);
  std::printf("canvas positions/s: %.1f\n", double(L) / t.sc);
  if (on_device)
    std::printf(
        "steps timed as generate() runs them (decode_sample); device busy time of the self-conditioned "
        "step %.4f s; through the host API (logits down and up) %.4f s\n",
        t.prof_sc.total_seconds(), t.sc_host_api);
  if (f.batch > 1)
    std::printf(
        "batched step (%lld self-conditioned canvases in one pass): %.3f s, %.1f canvas positions/s "
        "(%.2fx one canvas per pass)\n",
        (long long)f.batch, t.batch, double(f.batch * L) / t.batch, double(f.batch) * t.sc / t.batch);
  if (f.batch > 1 && on_device)
    std::printf("batched pass device busy time %.4f s (%.2fx one canvas's)\n", t.batch_device,
                double(f.batch) * t.prof_sc.total_seconds() / std::max(1e-12, t.batch_device));
  std::printf("commit (encoder, %lld tokens): %.3f s, %.1f GFLOP\n", (long long)L, t.commit, d.flop_commit / 1e9);
  std::printf("estimated tokens/s: %.2f at 16 steps, %.2f at 48 steps\n", tokens_per_s(L, t.first, t.sc, t.commit, 16),
              tokens_per_s(L, t.first, t.sc, t.commit, 48));
}

// The device traffic, the time by op and the full-model estimate.
void print_breakdown(const StepFlags& f, const LoadedModel& m, const StepTimes& t, const Derived& d) {
  const int64_t L = m.L;
  for (const Traffic& tr : t.traffic)
    std::printf(
        "device traffic of one self-conditioned step (%s): %lld bytes up, %lld bytes down (%.1f / %.1f per "
        "canvas position), %lld waits, %lld launches in %lld graphs\n",
        tr.path.c_str(), (long long)tr.h2d, (long long)tr.d2h, double(tr.h2d) / double(L), double(tr.d2h) / double(L),
        (long long)tr.syncs, (long long)tr.launches, (long long)tr.graphs);
  std::printf("self-conditioned step by op:\n");
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = OpKind(k);
    if (t.prof_sc.seconds(kind) <= 0) continue;
    const double s = t.prof_sc.seconds(kind), fl = t.prof_sc.flops(kind);
    std::printf("  %-15s %7.3f s  %6.1f%%  %8.1f GFLOP  %7.1f GFLOP/s\n", std::string(op_name(kind)).c_str(), s,
                100 * s / t.prof_sc.total_seconds(), fl / 1e9, fl > 0 ? fl / s / 1e9 : 0.0);
  }
  if (m.layers != f.estimate_layers)
    std::printf(
        "estimate for %lld layers (layer ops scaled, model-level ops once): step %.2f s (first %.2f s), "
        "commit %.2f s, %.1f positions/s, %.2f tokens/s at 16 steps, %.2f at 48\n",
        (long long)f.estimate_layers, d.e_sc, d.e_first, d.e_commit, double(L) / d.e_sc,
        tokens_per_s(L, d.e_first, d.e_sc, d.e_commit, 16), tokens_per_s(L, d.e_first, d.e_sc, d.e_commit, 48));
}

}  // namespace

json::Value op_profile_json(const cpu::OpProfile& prof) {
  json::Value split = json::Object{};
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = OpKind(k);
    if (prof.seconds(kind) <= 0) continue;
    json::Value e = json::Object{};
    e.set("seconds", prof.seconds(kind));
    e.set("gflop", prof.flops(kind) / 1e9);
    e.set("gflops", prof.flops(kind) > 0 ? prof.flops(kind) / prof.seconds(kind) / 1e9 : 0.0);
    split.set(std::string(op_name(kind)), e);
  }
  return split;
}

int run_bench_step(const Args& args) {
  StepFlags f;
  if (!parse_step_flags(args, f)) return 0;
  LoadedModel m = load_and_prefill(f);
  StepRunner r(*m.model, m.model->executor().backend());
  warm_up(r, m.L, m.V);
  const StepTimes t = measure(r, f);
  const Derived d = derive(f, m, t);
  if (f.as_json) {
    std::printf("%s\n", json::dump(step_json(f, m, t, d, r.on_device)).c_str());
    return 0;
  }
  print_setup(f, m);
  print_steps(f, m, t, d, r.on_device);
  print_breakdown(f, m, t, d);
  return 0;
}

}  // namespace dgemma::cli

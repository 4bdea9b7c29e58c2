// dgemma bench kernels [--json] [-t N]
// dgemma bench step -m DIR ...    (tools/bench_step.cc)
// dgemma bench vision -m DIR ...  (tools/bench_vision.cc)
// dgemma bench slice -o DIR [--layers N] [--vision-layers N]
//
// Speed of the CPU backend: kernel GFLOP/s against OpenBLAS cblas_sgemm
// (opened at run time if installed; else the scalar reference kernel), both
// measured in the same run, and the machine's peak (register-only FMA /
// vdpbf16ps loops); and (tools/bench_step.cc) the speed of whole denoising
// steps of a checkpoint, on the CPU or on any other backend (--backend, e.g. cuda).
// The Google Benchmark binaries in bench/ (scripts/bench.sh) cover more.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "bench_clock.h"
#include "bench_step.h"
#include "bench_vision.h"
#include "checkpoint/model_slice.h"
#include "cli.h"
#include "core/cpu_features.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "flags.h"
#include "suggest.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/blas_baseline.h"
#include "backend/cpu/cpu_bench.h"

namespace dgemma::cli {
namespace {

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

struct KernelFlags {
  bool as_json = false, no_blas = false;
  int64_t threads = 0, repeats = 5;
};

// Parses the flags; false when only the help was asked for.
bool parse_kernel_flags(const Args& args, KernelFlags& f) {
  FlagParser p("dgemma bench kernels [--json] [-t N]",
               "GEMM kernels at the shapes of the 26B-A4B model (canvas M=256, K=2816, N=2816/2112/4096; one\n"
               "expert M=16) in both CPU modes (fma: fp32 FMA on bf16 weights; dot: vdpbf16ps, activations\n"
               "rounded to bf16, AVX512_BF16 only), against OpenBLAS cblas_sgemm on the same (widened) weights\n"
               "when libopenblas can be opened (else the scalar reference kernel), measured in the same run,\n"
               "and the peak FLOP rate of the machine. --json: one object per line (name, gflops,\n"
               "baseline, baseline_gflops, peak_gflops, threads; GEMM lines also m, n, k, weight_dtype, mode).");
  p.add_bool("--json", &f.as_json, "one JSON object per line");
  p.add_int("-t,--threads", &f.threads, "threads (0 = all cores)", 0);
  p.add_int("--repeats", &f.repeats, "timed runs per kernel (best kept)", 1);
  p.add_bool("--no-blas", &f.no_blas, "compare with the scalar reference kernel even if OpenBLAS is installed");
  if (!p.parse(args)) return false;
  if (!p.positional().empty()) throw UsageError("bench kernels: unexpected argument '" + p.positional()[0] + "'");
  return true;
}

// The machine's peak FLOP rates, one line each (none for a mode it lacks).
void emit_peaks(bool as_json, CpuIsa isa, int nt, const cpu::PeakRates& pk) {
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
}

struct GemmShape {
  const char* name;
  int64_t m, k, n;
};

// What every GEMM shape is measured with: the baseline (OpenBLAS
// cblas_sgemm on fp32 copies of the weights when the library can be opened,
// else the scalar reference kernel) and the peaks to compare with.
struct KernelBench {
  const KernelFlags& flags;
  int nt;
  cpu::PeakRates pk;
  const cpu::BlasBaseline* blas;
  CpuBackend& reference;
};

// One GEMM shape: the baseline's time, then each CPU mode against it.
void bench_shape(const KernelBench& kb, const GemmShape& s) {
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
  if (kb.blas) {
    std::vector<float> wr(wb.size()), cblas(size_t(s.m * s.n));  // the bf16 weights, widened
    for (size_t i = 0; i < wb.size(); ++i) wr[i] = bf16_to_f32(wb[i]);
    t_ref =
        best_time(int(kb.flags.repeats), [&] { kb.blas->sgemm_nt(s.m, s.n, s.k, xf.data(), wr.data(), cblas.data()); });
  } else {
    t_ref = cpu::time_op(kb.reference, c, 1);
  }
  const std::string base = kb.blas ? "openblas_sgemm" : "reference";
  for (bool dot : {false, true}) {
    CpuBackendOptions o;
    o.threads = kb.nt;
    o.bf16_dot = dot;
    CpuBackend b(o);
    if (dot && !b.bf16_dot()) continue;
    const double t = cpu::time_op(b, c, int(kb.flags.repeats));
    const double gf = flop / t / 1e9, peak = dot ? kb.pk.dot_gflops : kb.pk.fma_gflops;
    json::Value v = json::Object{};
    v.set("name", std::string(s.name) + (dot ? "_dot" : "_fma"));
    v.set("gflops", gf);
    v.set("baseline", base);
    v.set("baseline_gflops", flop / t_ref / 1e9);
    v.set("peak_gflops", peak);
    v.set("threads", kb.nt);
    v.set("m", s.m);
    v.set("n", s.n);
    v.set("k", s.k);
    v.set("weight_dtype", "BF16");
    v.set("mode", dot ? "dot" : "fma");
    v.set("isa", std::string(isa_name(b.isa())));
    emit(kb.flags.as_json, v,
         std::string(s.name) + (dot ? " dot" : " fma") + "  M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) +
             " N=" + std::to_string(s.n) + ": " + fmt("%.1f", gf) + " GFLOP/s, " + fmt("%.2f", t_ref / t) + "x " +
             base + " (" + fmt("%.2f", flop / t_ref / 1e9) + "), " + fmt("%.0f", peak > 0 ? 100 * gf / peak : 0) +
             "% of " + (dot ? "dot" : "fma") + " peak");
  }
}

int run_kernels(const Args& args) {
  KernelFlags f;
  if (!parse_kernel_flags(args, f)) return 0;
  const int nt = f.threads > 0 ? int(f.threads) : int(std::max(1u, std::thread::hardware_concurrency()));
  const CpuIsa isa = default_isa();
  const cpu::PeakRates pk = cpu::measure_peak(isa, nt);
  emit_peaks(f.as_json, isa, nt, pk);
  const GemmShape shapes[] = {{"linear_canvas_h2816", 256, 2816, 2816},
                              {"linear_canvas_mlp2112", 256, 2816, 2112},
                              {"linear_canvas_q4096", 256, 2816, 4096},
                              {"expert_gate_up", 16, 2816, 1408},
                              {"expert_down", 16, 704, 2816}};
  const std::unique_ptr<cpu::BlasBaseline> blas = f.no_blas ? nullptr : cpu::BlasBaseline::open();
  if (blas) blas->set_threads(nt);
  if (!f.as_json)
    std::printf("baseline: %s\n",
                blas ? ("OpenBLAS cblas_sgemm (" + blas->library() + ", " + blas->config() + ")").c_str()
                     : "the scalar reference kernel (no OpenBLAS found)");
  CpuBackendOptions ro;
  ro.threads = nt;
  ro.isa = CpuIsa::kScalar;
  CpuBackend reference(ro);
  const KernelBench kb{f, nt, pk, blas.get(), reference};
  for (const GemmShape& s : shapes) bench_shape(kb, s);
  return 0;
}

// ---- slice ----------------------------------------------------------------------

int run_slice(const Args& args) {
  std::string out;
  int64_t layers = 2, vision_layers = 2;
  FlagParser p("dgemma bench slice -o DIR [--layers N] [--vision-layers N]",
               "Writes a synthetic checkpoint with the real 26B-A4B dimensions (docs/model.md §1.1) cut to N layers\n"
               "(sliding ..., last one full) and random bf16 weights, for `dgemma bench step` (2 layers: 4.7 GB),\n"
               "and the vision tower at its published shapes (docs/model.md §7.1) cut to --vision-layers layers\n"
               "(default 2; 0: none), for `dgemma bench vision`.");
  p.add_string("-o,--out", &out, "output folder", "DIR");
  p.add_int("--layers", &layers, "number of layers", 1, 30);
  p.add_int("--vision-layers", &vision_layers, "vision tower layers (0: no tower)", 0, 27);
  if (!p.parse(args)) return 0;
  if (out.empty()) throw UsageError("bench slice: give -o DIR");
  const double t0 = now_s();
  ensure_model_slice(out, int(layers), 1, int(vision_layers));
  std::fprintf(stderr, "slice with %lld layers (%lld vision layers) in %s (%.1f s)\n", (long long)layers,
               (long long)vision_layers, out.c_str(), now_s() - t0);
  return 0;
}

int run_bench(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf(
        "usage: dgemma bench kernels|step|vision|slice [options]   (dgemma bench <what> --help)\n"
        "       dgemma bench -m DIR [step options]            (= dgemma bench step -m DIR)\n"
        "  kernels  GEMM kernels vs OpenBLAS sgemm (or the scalar reference) and the machine peak\n"
        "  step     denoising-step and commit speed of a checkpoint (-m DIR; --backend cpu|cuda|...)\n"
        "  vision   vision-tower speed on a synthetic image (-m DIR with a tower), GEMM rate vs canvas\n"
        "  slice    write a synthetic real-size checkpoint slice for `step` (and `vision`)\n");
    return args.empty() ? 2 : 0;
  }
  // `dgemma bench -m DIR ...`: the step benchmark, the one users run on
  // their checkpoint.
  if (args[0] == "-m" || args[0] == "--model" || args[0].rfind("--model=", 0) == 0) return run_bench_step(args);
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "kernels") return run_kernels(rest);
  if (args[0] == "step") return run_bench_step(rest);
  if (args[0] == "vision") return run_bench_vision(rest);
  if (args[0] == "slice") return run_slice(rest);
  throw UsageError("bench: unknown benchmark '" + args[0] + "'" +
                   did_you_mean(args[0], {"kernels", "step", "vision", "slice"}) +
                   ": expected kernels, step, vision or slice");
}

const Subcommand kBench("bench", "speed: CPU kernels vs reference and peak, denoising steps (any backend), slices",
                        run_bench);

}  // namespace
}  // namespace dgemma::cli

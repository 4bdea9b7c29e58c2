// dgemma quantize IN OUT --format nf4|nvfp4-experts|mlx4 [--quantize-embeddings] [--quantize-router]
// dgemma quantize IN OUT.gguf --format q4_k_m|q8_0|… (docs/formats.md §5.5)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "dgemma/error.h"
#include "checkpoint/config.h"
#include "flags.h"
#include "gguf_tokenizer_data.h"
#include "progress_bar.h"
#include "quantize/export.h"
#include "quantize/export_gguf.h"
#include "quantize_calibration.h"

namespace dgemma::cli {
namespace {

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1 << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  return buf;
}

// Progress on stderr: the bar of progress_bar.h on a terminal (left on its
// line at the end), else a line per 10% (logs stay readable).
class Progress {
 public:
  Progress() : bar_(stderr, bar_options()), start_(std::chrono::steady_clock::now()) {}
  void update(uint64_t done, uint64_t total, const std::string& tensor) {
    if (bar_.active()) return bar_.update(done, total, tensor);
    const double f = total ? double(done) / double(total) : 1.0;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (int(f * 10) > last_decile_ || done == total) {
      last_decile_ = int(f * 10);
      std::fprintf(stderr, "quantize: %5.1f%% (%s of %s, %.0fs)\n", 100.0 * f, human_bytes(done).c_str(),
                   human_bytes(total).c_str(), secs);
    }
  }
  void finish() { bar_.finish(); }

 private:
  static ProgressBarOptions bar_options() {
    ProgressBarOptions o;
    o.label = "quantize";
    o.unit = ProgressUnit::kBytes;
    o.delay_s = 0;  // the export is the whole command: show it at once
    o.keep = true;
    return o;
  }
  ProgressBar bar_;
  std::chrono::steady_clock::time_point start_;
  int last_decile_ = -1;
};

// Refuses (usage error, exit 2) an OUT that already holds something: the
// export would overwrite its files without a word. An empty folder is fine.
void check_output_is_free(const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out, ec))) return;
  if (fs::is_directory(out, ec) && fs::is_empty(out, ec) && !ec) return;
  throw UsageError("quantize: the output " + out + " already exists" +
                   (fs::is_directory(out, ec) ? " and is not empty" : " (as a file)") +
                   ": give --force to write into it, or another folder");
}

// Peak resident memory of this process so far, in bytes.
uint64_t peak_rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return uint64_t(u.ru_maxrss) * 1024;
}

bool is_gguf_path(const std::string& out) { return out.size() > 5 && out.compare(out.size() - 5, 5, ".gguf") == 0; }

// OUT.gguf: one GGUF file in the published layout (docs/formats.md §5.5).
int run_gguf_export(const std::string& in, const std::string& out, const std::string& format, int threads, bool quiet) {
  const std::optional<quant::GgufFtype> ftype = quant::gguf_ftype_from_name(format);
  if (!ftype)
    throw UsageError("option --format: a .gguf output takes " + quant::gguf_ftype_names() + ", got '" + format + "'");
  GgufExportOptions o;
  o.ftype = *ftype;
  o.threads = threads;
  o.name = std::filesystem::path(in).lexically_normal().filename().string();
  if (o.name.empty()) o.name = std::filesystem::path(in).lexically_normal().parent_path().filename().string();
  o.tokenizer = gguf_tokenizer_data(in, load_model_config((std::filesystem::path(in) / "config.json").string()));
  Progress progress;
  if (!quiet)
    o.progress = [&](uint64_t done, uint64_t total, const std::string& t) { progress.update(done, total, t); };
  const GgufExportReport r = export_gguf(in, out, o);
  progress.finish();
  std::fprintf(stderr,
               "quantize: %d tensors quantized, %d plain, %d stored tensors not written (tied copies); relative RMS "
               "error %.4f; %s -> %s (%s); peak RSS %s\n",
               r.quantized, r.plain, r.dropped, r.rel_rms, human_bytes(r.input_bytes).c_str(),
               human_bytes(r.output_bytes).c_str(), r.out_file.c_str(), human_bytes(peak_rss()).c_str());
  if (r.vision_dropped > 0)
    std::fprintf(stderr,
                 "quantize: vision tower: %d tensors (%s) dropped: a GGUF written here has no vision tower (a "
                 "safetensors format keeps it)\n",
                 r.vision_dropped, human_bytes(r.vision_bytes).c_str());
  else
    std::fprintf(stderr, "quantize: vision tower: none in the input\n");
  return 0;
}

int run_quantize(const Args& args) {
  std::string format;
  bool embeddings = false, router = false, no_double_quant = false, quiet = false, force = false;
  CalibrationFlags calib;
  FlagParser p(
      "dgemma quantize IN OUT --format nf4|nvfp4-experts|mlx4 [--calibrate FILE | --calibrate-ids FILE]\n"
      "       dgemma quantize IN OUT.gguf --format q4_k_m|q8_0|...",
      "Post-training quantization of a BF16/F16/F32 checkpoint folder IN into OUT, in the chosen\n"
      "format's own on-disk layout and config entries. Weights are rounded to nearest:\n"
      "  nf4            bitsandbytes NF4 + double quant: attention, dense MLP, self-conditioning, experts\n"
      "  nvfp4-experts  ModelOpt NVFP4, routed experts only (split per expert): with --calibrate or\n"
      "                 --calibrate-ids W4A4 (\"NVFP4\", activation scales calibrated as hf_ptq does:\n"
      "                 encoder over each sample, decoder over a random canvas, layer by layer);\n"
      "                 without, the weight-only \"W4A16_NVFP4\"\n"
      "  mlx4           MLX affine: attention/dense MLP 8-bit, experts/self-conditioning 4-bit, group 64\n"
      "Embeddings, norms, router and layer scalars stay unquantized unless asked. The vision tower is\n"
      "copied through as stored (bf16 stays bf16), and a .gguf output drops it; one line says which.\n"
      "An OUT ending in\n"
      ".gguf is one GGUF file in the published DiffusionGemma layout, from any checkpoint dgemma\n"
      "reads, with llama.cpp's per-tensor types for the file type: " +
          quant::gguf_ftype_names() +
          ".\n"
          "One tensor is processed at a time, and calibration holds one layer's weights at a time, so\n"
          "memory stays below the model's size. Prints the peak resident memory at the end.");
  p.add_string(
      "--format", &format,
      export_format_names() + " (an OUT folder), or a GGUF file type for an OUT.gguf: " + quant::gguf_ftype_names(),
      "FORMAT");
  p.add_bool("--quantize-embeddings", &embeddings, "also quantize embed_tokens (nf4: NF4, mlx4: 8-bit)");
  p.add_bool("--quantize-router", &router, "also quantize router.proj (nf4: NF4, mlx4: 8-bit)");
  p.add_bool("--no-double-quant", &no_double_quant, "nf4: keep absmax in fp32");
  std::string kv_cache = "fp8-cast";
  p.add_choice("--kv-cache", &kv_cache,
               "nvfp4-experts: the KV cache the config declares for serving engines: fp8-cast (FP8 with a constant "
               "scale, hf_ptq's default) or none",
               {"fp8-cast", "none"}, "KIND");
  p.add_bool("-q,--quiet", &quiet, "no progress output");
  p.add_bool("--force", &force,
             "write into an OUT that already holds files, replacing those the export writes (the others stay)");
  calib.add_to(p);
  if (!p.parse(args)) return 0;
  if (p.positional().size() != 2) throw UsageError("quantize: expected IN and OUT folders (see --help)");
  calib.check();
  if (is_gguf_path(p.positional()[1])) {
    if (format.empty())
      throw UsageError("quantize: give --format " + quant::gguf_ftype_names() + " for a .gguf output");
    if (embeddings || router || no_double_quant || calib.wanted())
      throw UsageError(
          "quantize: --quantize-embeddings, --quantize-router, --no-double-quant and --calibrate do not apply to a "
          ".gguf output (its file type decides every tensor's type)");
    if (!force) check_output_is_free(p.positional()[1]);
    return run_gguf_export(p.positional()[0], p.positional()[1], format, int(calib.threads), quiet);
  }
  if (format.empty()) throw UsageError("quantize: give --format " + export_format_names());
  std::optional<ExportFormat> f = parse_export_format(format);
  if (!f) throw UsageError("option --format: expected " + export_format_names() + ", got '" + format + "'");
  if (calib.wanted() && *f != ExportFormat::kNvfp4Experts)
    throw UsageError("quantize: --format " + format +
                     " has no activation parameters to calibrate; --calibrate applies to nvfp4-experts");
  if (!force) check_output_is_free(p.positional()[1]);
  ExportOptions o;
  o.format = *f;
  o.quantize_embeddings = embeddings;
  o.quantize_router = router;
  o.nf4_double_quant = !no_double_quant;
  o.threads = int(calib.threads);
  o.kv_cache_fp8 = kv_cache == "fp8-cast";
  std::optional<ExpertActivationRanges> ranges;
  if (calib.wanted()) {
    check_export_input(p.positional()[0], o);  // before the calibration's hours, not after
    std::filesystem::create_directories(p.positional()[1]);
    ranges = run_calibration(p.positional()[0], p.positional()[1], calib, quiet);
    o.expert_inputs = &*ranges;
    o.per_expert_input_scales = calib.input_scales == "expert";
    if (!quiet) std::fprintf(stderr, "calibrate: done; peak RSS so far %s\n", human_bytes(peak_rss()).c_str());
  } else if (*f == ExportFormat::kNvfp4Experts && !quiet) {
    std::fprintf(stderr,
                 "quantize: no --calibrate: writing the weight-only variant W4A16_NVFP4 (activations stay bf16); "
                 "give --calibrate FILE for W4A4 NVFP4\n");
  }
  Progress progress;
  if (!quiet)
    o.progress = [&](uint64_t done, uint64_t total, const std::string& t) { progress.update(done, total, t); };
  const ExportReport r = export_quantized(p.positional()[0], p.positional()[1], o);
  progress.finish();
  std::fprintf(stderr,
               "quantize: %d tensors quantized, %d copied, %d tied copies dropped; %s -> %s (%s); peak RSS %s\n",
               r.quantized, r.copied, r.dropped, human_bytes(r.input_bytes).c_str(),
               human_bytes(r.output_bytes).c_str(), r.out_file.c_str(), human_bytes(peak_rss()).c_str());
  if (r.vision_copied > 0)
    std::fprintf(stderr, "quantize: vision tower: %d tensors (%s) copied through unquantized, as stored (%s)\n",
                 r.vision_copied, human_bytes(r.vision_bytes).c_str(), r.vision_dtypes.c_str());
  else
    std::fprintf(stderr, "quantize: vision tower: none in the input\n");
  return 0;
}

const Subcommand kQuantize("quantize", "export a checkpoint as NF4, NVFP4 (experts, calibrated W4A4) or MLX 4-bit",
                           run_quantize);

}  // namespace
}  // namespace dgemma::cli

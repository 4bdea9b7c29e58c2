#include "quantize_calibration.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "backend/backend_factory.h"
#include "calibrate/calibrate_experts.h"
#include "calibrate/calibration_samples.h"
#include "core/file_io.h"
#include "dgemma/error.h"
#include "model/diffusion_gemma.h"
#include "model_source.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::cli {
namespace {

namespace fs = std::filesystem;

// MemAvailable of /proc/meminfo in bytes (0 when unknown).
uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

std::vector<std::vector<int32_t>> tokenize_texts(const std::string& file, const std::string& tokenizer_path,
                                                 bool chat) {
  const std::vector<std::string> texts = read_calibration_texts(read_text_file(file), file);
  const Tokenizer tok = Tokenizer::load(tokenizer_path);
  std::vector<std::vector<int32_t>> out;
  out.reserve(texts.size());
  for (const std::string& t : texts) {
    if (chat)
      out.push_back(encode_chat(tok, {ChatMessage("user", t)}, /*add_generation_prompt=*/true,
                                /*enable_thinking=*/false, ChatTemplateKind::kAuto, ChatContent::kPlainText));
    else
      out.push_back(tok.encode(t, /*add_special=*/true));  // leading <bos>, as hf_ptq's tokenizer call
  }
  return out;
}

}  // namespace

void CalibrationFlags::add_to(FlagParser& p) {
  p.add_string("--calibrate", &texts,
               "nvfp4-experts: calibrate the experts' activation scales (W4A4) on this text file: one sample per "
               "line, or JSON lines with a \"text\" field",
               "FILE");
  p.add_string("--calibrate-ids", &ids,
               "as --calibrate, samples given as token ids, one per line as `dgemma tokenize` prints them", "FILE");
  p.add_string("--tokenizer", &tokenizer, "with --calibrate: tokenizer.json (default: IN/tokenizer.json)", "FILE");
  p.add_bool("--calib-chat", &chat, "with --calibrate: render each sample as a user turn with the chat template");
  p.add_int("--calib-samples", &samples, "calibration samples used (the first N non-empty ones)", 1, 1 << 20);
  p.add_int("--calib-seq-len", &seq_len, "tokens per sample at most (longer ones are cut)", 1, 1 << 20);
  p.add_choice("--calib-passes", &passes,
               "passes observed: both (as hf_ptq: encoder over the sample, decoder over a random canvas), "
               "encoder or decoder",
               {"both", "encoder", "decoder"}, "PASSES");
  p.add_int("--calib-seed", &seed, "seed of the random decoder canvases", 0);
  p.add_choice("--calib-states", &states,
               "where hidden states wait between layers: memory, disk (a scratch file in OUT) or auto (disk when "
               "they would take over a quarter of the available memory)",
               {"auto", "memory", "disk"}, "WHERE");
  p.add_choice("--calib-precision", &precision,
               "calibration arithmetic: fp32 (the reference in float32) or bf16 (Transformers in bf16 where dgemma "
               "rounds)",
               {"fp32", "bf16"}, "MODE");
  p.add_choice("--input-scales", &input_scales,
               "layer: one input_scale per layer and projection, shared by its experts (ModelOpt); expert: each "
               "expert its own (an expert no token reached takes its layer's)",
               {"layer", "expert"}, "HOW");
  p.add_int("-t,--threads", &threads, "CPU threads of the calibration run and the quantizers (0 = all cores)", 0, 4096);
}

void CalibrationFlags::check() const {
  if (!texts.empty() && !ids.empty()) throw UsageError("quantize: give --calibrate or --calibrate-ids, not both");
  if (!ids.empty() && (chat || !tokenizer.empty()))
    throw UsageError("quantize: --calib-chat and --tokenizer apply to --calibrate (text), not --calibrate-ids");
}

ExpertActivationRanges run_calibration(const std::string& in_dir, const std::string& scratch_dir,
                                       const CalibrationFlags& f, bool quiet) {
  const auto start = std::chrono::steady_clock::now();
  ModelOptions mo;
  mo.precision = f.precision == "bf16" ? WeightPrecision::kBF16 : WeightPrecision::kAsStored;
  mo.verify_tied_copies = false;  // the export compares nothing; reading both copies would cost memory
  std::unique_ptr<DiffusionGemma> model = DiffusionGemma::load(in_dir, make_cpu_backend(int(f.threads)), mo);
  const ModelConfig& cfg = model->config();

  const std::string file = f.ids.empty() ? f.texts : f.ids;
  std::vector<std::vector<int32_t>> raw =
      f.ids.empty() ? tokenize_texts(f.texts, resolve_tokenizer_path(f.tokenizer, in_dir), f.chat)
                    : read_calibration_ids(read_text_file(f.ids), f.ids, cfg.vocab_size);
  // Ids read from a file were checked by their reader; a tokenizer may know
  // more tokens than the model.
  for (size_t s = 0; f.ids.empty() && s < raw.size(); ++s)
    for (int32_t id : raw[s])
      if (id < 0 || id >= cfg.vocab_size)
        throw Error(file + ": sample " + std::to_string(s + 1) + " has token id " + std::to_string(id) +
                    ", outside the model's vocabulary [0, " + std::to_string(cfg.vocab_size) + ")");
  const std::vector<std::vector<int32_t>> samples = fit_calibration_samples(std::move(raw), f.samples, f.seq_len, file);

  ExpertCalibrationOptions o;
  o.encoder = f.passes != "decoder";
  o.decoder = f.passes != "encoder";
  o.canvas = [&](size_t s) { return calibration_canvas(uint64_t(f.seed), s, cfg.canvas_length, cfg.vocab_size); };
  const uint64_t state_bytes = calibration_state_bytes(cfg, samples, o);
  const uint64_t avail = available_memory();
  const bool disk = f.states == "disk" || (f.states == "auto" && avail > 0 && state_bytes > avail / 4);
  if (disk) o.scratch_dir = scratch_dir;
  if (!quiet) {
    size_t tokens = 0;
    for (const auto& s : samples) tokens += s.size();
    std::fprintf(stderr, "calibrate: %zu samples, %zu tokens, passes %s; hidden states %.1f MiB %s\n", samples.size(),
                 tokens, f.passes.c_str(), double(state_bytes) / double(1 << 20), disk ? "on disk" : "in memory");
    o.progress = [&](int layer, size_t sample) {
      if (sample + 1 != samples.size()) return;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "calibrate: layer %d/%d done (%.0fs)\n", layer + 1, cfg.num_layers, secs);
    };
  }
  ExpertActivationRanges r = calibrate_expert_inputs(*model, samples, o);
  r.sha256 = calibration_set_sha256(samples);
  r.passes = o.encoder && o.decoder ? "encoder+decoder" : (o.encoder ? "encoder" : "decoder");
  r.precision = f.precision;
  return r;
}

}  // namespace dgemma::cli

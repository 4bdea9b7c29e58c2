#include "model/default_model.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/dtype.h"
#include "core/data_dir.h"
#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"
#include "checkpoint/synthetic_checkpoint.h"

namespace dgemma {
namespace {

namespace fs = std::filesystem;

// docs/model.md §5.2 tiny-B, with canvas 16 (enlarged from 8 so that
// commits then cross the window of 8 in every canvas) and fewer denoising
// steps than the published 48 so that `run` takes seconds on 2 cores: each
// step runs a [16, 262144] LM head and soft embedding.
constexpr int kVocab = 262144, kHidden = 96, kLayers = 4, kHeads = 4, kKvHeads = 2, kGlobalKvHeads = 1;
constexpr int kHeadDim = 16, kGlobalHeadDim = 32, kWindow = 8, kIntermediate = 128;
constexpr int kExperts = 8, kTopK = 3, kMoeIntermediate = 32, kCanvas = 16;
constexpr int kSteps = 8, kMaxNewTokens = 64;
// A small vision tower (golden V's shape, docs/model.md §7.1): images of up
// to 70 soft tokens in 4-pixel patches, so that any picture is cheap.
constexpr SyntheticVision kVision{.hidden = 32,
                                  .intermediate = 64,
                                  .layers = 2,
                                  .heads = 4,
                                  .head_dim = 8,
                                  .patch = 4,
                                  .pooling = 3,
                                  .positions = 256,
                                  .standardize = true};
constexpr int kMaxSoftTokens = 70;
// The Gemma 4 image token ids (docs/model.md §7.1).
constexpr int kImageTokenId = 258880, kBoiTokenId = 255999, kEoiTokenId = 258882;
constexpr uint64_t kSeed = 0x6467656d6d61ULL;  // "dgemma"

json::Value model_config_json() {
  std::vector<std::string> types;
  for (int i = 0; i < kLayers; ++i) types.emplace_back(i + 1 == kLayers ? "full_attention" : "sliding_attention");
  const SyntheticShape shape{.vocab = kVocab,
                             .hidden = kHidden,
                             .layers = kLayers,
                             .heads = kHeads,
                             .kv_heads = kKvHeads,
                             .global_kv_heads = kGlobalKvHeads,
                             .head_dim = kHeadDim,
                             .global_head_dim = kGlobalHeadDim,
                             .layer_types = types,
                             .window = kWindow,
                             .intermediate = kIntermediate,
                             .experts = kExperts,
                             .top_k = kTopK,
                             .moe_intermediate = kMoeIntermediate,
                             .canvas = kCanvas,
                             .vision = kVision};
  json::Value text = synthetic_text_config(shape);
  text.set("max_position_embeddings", 262144);
  text.set("tie_word_embeddings", true);
  text.set("use_bidirectional_attention", "vision");
  text.set("pad_token_id", 0);
  text.set("bos_token_id", 2);
  text.set("eos_token_id", 1);
  text.set("dtype", "bfloat16");

  json::Value root = json::Object{};
  root.set("architectures", json::Array{json::Value("DiffusionGemmaForBlockDiffusion")});
  root.set("model_type", "diffusion_gemma");
  root.set("canvas_length", kCanvas);
  root.set("eos_token_id", json::Array{json::Value(1), json::Value(106)});
  root.set("tie_word_embeddings", true);
  root.set("dtype", "bfloat16");
  root.set("text_config", text);
  root.set("image_token_id", kImageTokenId);
  root.set("boi_token_id", kBoiTokenId);
  root.set("eoi_token_id", kEoiTokenId);
  root.set("vision_soft_tokens_per_image", kMaxSoftTokens);
  root.set("vision_config", synthetic_vision_config(shape.vision));
  root.set("_dgemma_note", "dgemma default model: RANDOM weights (tiny-B shape); output is gibberish");
  return root;
}

// The image processor's settings for the tower (docs/model.md §7.1): patch size
// and pooling as the tower's, rescale to [0, 1], no normalization.
json::Value preprocessor_config_json() {
  json::Value p = json::Object{};
  p.set("image_processor_type", "Gemma4ImageProcessor");
  p.set("patch_size", kVision.patch);
  p.set("pooling_kernel_size", kVision.pooling);
  p.set("max_soft_tokens", kMaxSoftTokens);
  p.set("do_convert_rgb", true);
  p.set("do_resize", true);
  p.set("resample", 3);
  p.set("do_rescale", true);
  p.set("rescale_factor", 1.0 / 255.0);
  p.set("do_normalize", false);
  p.set("image_mean", json::Array{json::Value(0.0), json::Value(0.0), json::Value(0.0)});
  p.set("image_std", json::Array{json::Value(1.0), json::Value(1.0), json::Value(1.0)});
  return p;
}

json::Value generation_config_json() {
  json::Value g = json::Object{};
  g.set("max_new_tokens", kMaxNewTokens);
  g.set("max_denoising_steps", kSteps);
  json::Value sampler = json::Object{};
  sampler.set("_cls_name", "EntropyBoundSamplerConfig");
  // Random weights never get the per-position entropies near 0 that the
  // published bound of 0.1 nats expects (they fall from ~4 to ~1.6 nats over
  // a canvas), so it would accept exactly one position per step; a bound of
  // 5 nats accepts a few, and --visualize shows the canvas filling in.
  sampler.set("entropy_bound", 5.0);
  g.set("sampler_config", sampler);
  g.set("t_max", 0.8);
  g.set("t_min", 0.4);
  g.set("stability_threshold", 1);
  g.set("confidence_threshold", 0.005);
  g.set("eos_token_id", json::Array{json::Value(1), json::Value(106), json::Value(50)});
  g.set("pad_token_id", 0);
  g.set("bos_token_id", 2);
  return g;
}

// A small portable generator (splitmix64 + Box-Muller) instead of
// std::normal_distribution, whose output differs between standard libraries:
// the default model must be the same file everywhere.
class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : state_(seed) {}
  double uniform() {  // (0, 1), 53 bits
    return (double(next() >> 11) + 0.5) * 0x1.0p-53;
  }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform())), a = 6.283185307179586 * uniform();
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Initialization in the spirit of docs/model.md §5.3: no weight is the identity
// (norms, scales and layer scalars are random around 1, encoder and decoder
// layer scalars differ). The final norm is kept near 1: larger values push
// most of the 262,144 logits into the soft-cap (|logit| -> 30), which makes
// them flat (entropy ~8 nats) instead of peaked.
void random_values(const ExpectedTensor& t, std::vector<float>& out) {
  NormalStream rng(kSeed ^ fnv1a(t.name));
  const bool is_vector = t.shape.size() == 1;
  const bool final_norm = t.name == kDecoderPrefix + "norm.weight";
  const bool layer_scalar = t.name.size() >= 12 && t.name.compare(t.name.size() - 12, 12, "layer_scalar") == 0;
  for (float& x : out) {
    double v;
    if (layer_scalar)
      v = 0.6 + 0.3 * rng.uniform();
    else if (final_norm)
      v = 1.0 + 0.5 * rng.uniform();
    else if (is_vector)
      v = 0.6 + 0.7 * rng.uniform();
    else if (t.component == Component::kEmbedding)
      v = 0.5 * rng.normal();
    else
      v = 0.15 * rng.normal();
    x = float(v);
  }
}

json::Value* find_mut(json::Value& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  for (auto& [k, v] : object.as_object_mut())
    if (k == key) return &v;
  return nullptr;
}

const char kReadme[] =
    "dgemma default model (generated by dgemma on first use; safe to delete).\n"
    "\n"
    "RANDOM WEIGHTS: this is the tiny-B test shape of dgemma's docs/model.md §5.2\n"
    "(vocab 262144, hidden 96, 4 layers; a 2-layer vision tower of width 32)\n"
    "with weights drawn from a fixed-seed normal distribution. It exercises\n"
    "the tokenizer, chat template, vision tower and the block-diffusion loop\n"
    "end to end, but its output is gibberish. For real\n"
    "text, download google/diffusiongemma-26B-A4B-it and run\n"
    "  dgemma run -m /path/to/diffusiongemma-26B-A4B-it -p \"Hello\"\n"
    "\n"
    "tokenizer.json is the Gemma 3 tokenizer with the Gemma 4 control tokens\n"
    "(<|turn>, <turn|>, <|channel>, ...) at their Gemma 4 ids.\n";

}  // namespace

std::string dgemma_cache_root() {
  if (const char* c = std::getenv("DGEMMA_CACHE"); c != nullptr && *c != '\0') return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0')
    return (fs::path(x) / "dgemma").string();
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    return (fs::path(h) / ".cache" / "dgemma").string();
  throw Error("no cache folder for the default model: set DGEMMA_CACHE (or HOME / XDG_CACHE_HOME), or use -m DIR");
}

std::string default_model_dir() { return (fs::path(dgemma_cache_root()) / kDefaultModelName).string(); }

std::string default_tokenizer_source() { return data_file("tokenizer.json"); }

std::string gemma4_style_tokenizer_json(const std::string& gemma3_json, const std::string& source) {
  struct Change {
    int id;
    const char* gemma3;
    const char* gemma4;
  };
  // docs/model.md §3.6 special ids.
  static const Change kChanges[] = {
      {46, "<unused40>", "<|tool>"},
      {47, "<unused41>", "<tool|>"},
      {48, "<unused42>", "<|tool_call>"},
      {49, "<unused43>", "<tool_call|>"},
      {50, "<unused44>", "<|tool_response>"},
      {51, "<unused45>", "<tool_response|>"},
      {52, "<unused46>", "<|\"|>"},
      {98, "<unused92>", "<|think|>"},
      {100, "<unused94>", "<|channel>"},
      {101, "<unused95>", "<channel|>"},
      {105, "<start_of_turn>", "<|turn>"},
      {106, "<end_of_turn>", "<turn|>"},
      // The image markers (docs/model.md §7.6): begin, placeholder, end.
      {255999, "<start_of_image>", "<|image>"},
      {258880, "<unused2978>", "<|image|>"},
      {258882, "<unused2980>", "<image|>"},
  };
  json::ParseOptions po;
  po.source = source;
  json::Value root = json::parse(gemma3_json, po);
  json::Value* added = find_mut(root, "added_tokens");
  json::Value* model = find_mut(root, "model");
  json::Value* vocab = model ? find_mut(*model, "vocab") : nullptr;
  if (added == nullptr || !added->is_array() || vocab == nullptr || !vocab->is_object())
    throw Error(source + ": expected a tokenizer.json with added_tokens and model.vocab");

  for (const Change& c : kChanges) {
    bool in_added = false;
    for (json::Value& t : added->as_array_mut()) {
      const json::Value* id = t.find("id");
      if (id == nullptr || !id->is_integer() || id->as_int() != c.id) continue;
      const json::Value* content = t.find("content");
      if (content == nullptr || !content->is_string() || content->as_string() != c.gemma3)
        throw Error(source + ": added token " + std::to_string(c.id) + " is not \"" + c.gemma3 +
                    "\"; not a Gemma 3 tokenizer.json");
      t.set("content", c.gemma4);
      t.set("special", true);
      in_added = true;
    }
    if (!in_added) throw Error(source + ": no added token with id " + std::to_string(c.id));
    bool in_vocab = false;
    for (auto& [piece, id] : vocab->as_object_mut()) {
      if (piece == c.gemma4) throw Error(source + ": vocabulary already has \"" + std::string(c.gemma4) + "\"");
      if (piece == c.gemma3) {
        if (!id.is_integer() || id.as_int() != c.id)
          throw Error(source + ": vocabulary piece \"" + c.gemma3 + "\" is not id " + std::to_string(c.id));
        piece = c.gemma4;
        in_vocab = true;
      }
    }
    if (!in_vocab) throw Error(source + ": vocabulary has no \"" + std::string(c.gemma3) + "\"");
  }
  // Gemma 4 has no id 262144; keep the vocabulary at exactly 262,144 ids.
  json::Array kept;
  for (json::Value& t : added->as_array_mut()) {
    const json::Value* id = t.find("id");
    if (id != nullptr && id->is_integer() && id->as_int() >= kVocab) continue;
    kept.push_back(std::move(t));
  }
  *added = std::move(kept);
  return json::dump(root);
}

void write_default_model(const std::string& dir, const std::string& gemma3_tokenizer_json) {
  if (!fs::exists(gemma3_tokenizer_json))
    throw Error("the default model is built from the Gemma 3 tokenizer at " + gemma3_tokenizer_json +
                " (installed with dgemma under share/dgemma), which does not exist; use -m DIR with a real checkpoint");
  fs::create_directories(dir);
  const fs::path d(dir);
  write_file_atomically((d / "tokenizer.json").string(),
                        gemma4_style_tokenizer_json(read_text_file(gemma3_tokenizer_json), gemma3_tokenizer_json));
  write_file_atomically((d / "config.json").string(), json::dump(model_config_json(), 2) + "\n");
  write_file_atomically((d / "generation_config.json").string(), json::dump(generation_config_json(), 2) + "\n");
  write_file_atomically((d / "preprocessor_config.json").string(), json::dump(preprocessor_config_json(), 2) + "\n");
  write_file_atomically((d / "README.txt").string(), kReadme);

  write_synthetic_weights(dir, DType::kBF16, random_values,
                          {{"format", "pt"}, {"dgemma", "default model, random weights"}});
}

DefaultModel ensure_default_model() {
  DefaultModel result;
  result.dir = default_model_dir();
  if (fs::is_directory(result.dir)) return result;

  const auto t0 = std::chrono::steady_clock::now();
  const fs::path final_dir(result.dir);
  std::error_code ec;
  fs::create_directories(final_dir.parent_path(), ec);
  if (ec) throw Error("cannot create the cache folder " + final_dir.parent_path().string() + ": " + ec.message());
  // A unique temporary sibling, renamed into place when complete (rename of
  // a directory is atomic on POSIX file systems).
  static std::atomic<int> counter{0};
  const fs::path tmp = final_dir.parent_path() / ("." + final_dir.filename().string() + ".tmp-" +
                                                  std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(tmp, ec);
  try {
    write_default_model(tmp.string(), default_tokenizer_source());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    fs::remove_all(tmp);
    // Another process finished first: use its copy.
    if (!fs::is_directory(final_dir))
      throw Error("cannot move the default model into " + result.dir + ": " + ec.message());
    return result;
  }
  result.created = true;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace dgemma

#include "checkpoint/gguf_config.h"

#include <cmath>
#include <map>
#include <set>

#include "checkpoint/gguf_names.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

constexpr std::string_view kArchitecture = "diffusion-gemma";
const std::string kArch = "diffusion-gemma.";

std::string fmt(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

// Key access with the file's name and the key in every message.
class Keys {
 public:
  explicit Keys(const GgufKeys& keys) : k_(keys) {}
  [[noreturn]] void fail(std::string_view key, const std::string& why) const {
    throw Error(k_.source() + ": key " + std::string(key) + ": " + why);
  }
  const GgufKeys& raw() const { return k_; }
  bool has(std::string_view key) const { return k_.has(key); }
  bool is_array(std::string_view key) const {
    const GgufKv* kv = k_.find(key);
    return kv && kv->type == GgufValueType::kArray;
  }
  int64_t positive(std::string_view key, int64_t max = int64_t(1) << 40) const {
    const int64_t v = k_.integer(key);
    if (v <= 0) fail(key, "must be positive, got " + std::to_string(v));
    if (v > max) fail(key, "value " + std::to_string(v) + " is implausibly large");
    return v;
  }
  // A value per layer: an array of `layers` entries, or one scalar for all.
  std::vector<int64_t> per_layer(std::string_view key, int layers) const {
    std::vector<int64_t> v;
    if (is_array(key)) {
      v = k_.integers(key);
      if (int64_t(v.size()) != layers)
        fail(key, "has " + std::to_string(v.size()) + " entries but block_count is " + std::to_string(layers));
    } else {
      v.assign(size_t(layers), k_.integer(key));
    }
    for (int64_t x : v)
      if (x <= 0 || x > (int64_t(1) << 20)) fail(key, "entries must be positive, got " + std::to_string(x));
    return v;
  }
  double number_or(std::string_view key, double dflt) const { return has(key) ? k_.number(key) : dflt; }

 private:
  const GgufKeys& k_;
};

std::string arch(std::string_view key) { return kArch + std::string(key); }

const GgufTensorInfo* find_tensor(const std::vector<GgufTensorInfo>& tensors, std::string_view name) {
  for (const GgufTensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

[[noreturn]] void tensor_fail(const GgufKeys& k, std::string_view tensor, const std::string& why) {
  throw Error(k.source() + ": tensor " + std::string(tensor) + ": " + why);
}

std::string ne_string(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// Variants of the Gemma 4 family that dgemma does not implement, refused by
// key rather than computed wrongly (docs/formats.md §5.3).
void refuse_variants(const Keys& k) {
  if (k.has(arch("attention.causal")) && k.raw().boolean(arch("attention.causal")))
    k.fail(arch("attention.causal"), "true is not supported (the decoder attends bidirectionally)");
  if (k.has(arch("attention.shared_kv_layers")) && k.raw().integer(arch("attention.shared_kv_layers")) != 0)
    k.fail(arch("attention.shared_kv_layers"), "KV sharing across layers is not supported by DiffusionGemma");
  if (k.has(arch("embedding_length_per_layer_input")) && k.raw().integer(arch("embedding_length_per_layer_input")) != 0)
    k.fail(arch("embedding_length_per_layer_input"), "per-layer inputs are not supported by DiffusionGemma");
  if (k.has("diffusion.shift_logits") && k.raw().boolean("diffusion.shift_logits"))
    k.fail("diffusion.shift_logits", "true is not supported (canvas logits are not shifted)");
}

// ne[0] of a per-layer tensor must be the layer's head dim.
void check_norm_width(const GgufKeys& k, const std::vector<GgufTensorInfo>& tensors, const std::string& name,
                      int head_dim) {
  const GgufTensorInfo* t = find_tensor(tensors, name);
  if (!t) tensor_fail(k, name, "missing");
  if (t->ne.size() != 1 || t->ne[0] != head_dim)
    tensor_fail(k, name,
                "shape " + ne_string(t->ne) + " does not match the layer's head dim " + std::to_string(head_dim));
}

// The full layers' RoPE from rope_freqs.weight (docs/formats.md §5.3): a
// run of factors 1 (rotated pairs) followed by huge factors (pairs ggml then
// turns by a negligible angle: unrotated).
RopeSpec full_rope(const Keys& k, const std::vector<float>* freqs, int global_head_dim) {
  RopeSpec r;
  r.theta = k.raw().number(arch("rope.freq_base"));
  if (!(r.theta > 1.0) || !std::isfinite(r.theta)) k.fail(arch("rope.freq_base"), "must be > 1, got " + fmt(r.theta));
  if (!freqs) {
    r.type = "default";
    return r;
  }
  const std::string name(kGgufRopeFreqsName);
  if (int64_t(freqs->size()) * 2 != global_head_dim)
    tensor_fail(k.raw(), name,
                "has " + std::to_string(freqs->size()) + " factors; the full layers' head dim " +
                    std::to_string(global_head_dim) + " needs " + std::to_string(global_head_dim / 2));
  size_t rotated = 0;
  while (rotated < freqs->size() && (*freqs)[rotated] == 1.0f) ++rotated;
  for (size_t i = rotated; i < freqs->size(); ++i)
    if (!((*freqs)[i] >= 1e29f))
      tensor_fail(k.raw(), name,
                  "factor " + std::to_string(i) + " is " + fmt((*freqs)[i]) +
                      "; only 1 (rotated pair) followed by factors >= 1e29 (unrotated pairs) is supported");
  if (rotated == 0) tensor_fail(k.raw(), name, "rotates no pair (the first factor is not 1)");
  r.type = "proportional";
  r.partial_rotary_factor = double(rotated) / double(freqs->size());
  return r;
}

void read_dimensions(const Keys& k, ModelConfig& c) {
  c.num_layers = int(k.positive(arch("block_count"), 4096));
  c.hidden_size = int(k.positive(arch("embedding_length"), int64_t(1) << 20));
  c.intermediate_size = int(k.positive(arch("feed_forward_length"), int64_t(1) << 24));
  c.moe_intermediate_size = int(k.positive(arch("expert_feed_forward_length"), int64_t(1) << 24));
  c.num_experts = int(k.positive(arch("expert_count"), 1 << 16));
  c.top_k_experts = int(k.positive(arch("expert_used_count"), 1 << 16));
  if (c.top_k_experts > c.num_experts)
    k.fail(arch("expert_used_count"),
           std::to_string(c.top_k_experts) + " exceeds expert_count " + std::to_string(c.num_experts));
  const std::vector<int64_t> heads = k.per_layer(arch("attention.head_count"), c.num_layers);
  for (int64_t h : heads)
    if (h != heads[0]) k.fail(arch("attention.head_count"), "differs between layers; dgemma needs one head count");
  c.num_heads = int(heads[0]);
  c.sliding_window = int(k.positive(arch("attention.sliding_window"), int64_t(1) << 30));
  c.rms_norm_eps = k.raw().number(arch("attention.layer_norm_rms_epsilon"));
  if (!(c.rms_norm_eps > 0.0) || c.rms_norm_eps > 1.0)
    k.fail(arch("attention.layer_norm_rms_epsilon"), "must be in (0, 1], got " + fmt(c.rms_norm_eps));
  c.final_logit_softcapping = k.number_or(arch("final_logit_softcapping"), 0.0);
  if (c.final_logit_softcapping < 0.0 || !std::isfinite(c.final_logit_softcapping))
    k.fail(arch("final_logit_softcapping"), "must be >= 0, got " + fmt(c.final_logit_softcapping));
  c.max_position_embeddings = k.positive(arch("context_length"));
  c.canvas_length = int(k.positive("diffusion.canvas_length", 1 << 20));
}

// Head dims per layer type: key_length must equal value_length (K and V
// share the head dim), and the RoPE dimension count must cover the head.
int head_dim_of(const Keys& k, std::string_view suffix) {
  const std::string key = arch("attention.key_length" + std::string(suffix));
  const std::string value = arch("attention.value_length" + std::string(suffix));
  const int64_t d = k.positive(key, 1 << 16);
  if (k.has(value) && k.raw().integer(value) != d)
    k.fail(value, std::to_string(k.raw().integer(value)) + " differs from " + key + " " + std::to_string(d) +
                      "; dgemma needs equal key and value head dims");
  if (d % 2 != 0) k.fail(key, "head dim " + std::to_string(d) + " must be even (RoPE pairs)");
  const std::string rope_dims = arch("rope.dimension_count" + std::string(suffix));
  if (k.has(rope_dims) && k.raw().integer(rope_dims) != d)
    k.fail(rope_dims, std::to_string(k.raw().integer(rope_dims)) + " differs from the head dim " + std::to_string(d) +
                          " (partial rotation is expressed by rope_freqs.weight only)");
  return int(d);
}

void read_tokens(const Keys& k, ModelConfig& c) {
  const GgufKv* tokens = k.raw().find("tokenizer.ggml.tokens");
  if (!tokens) k.fail("tokenizer.ggml.tokens", "required key is missing (the vocabulary size comes from it)");
  if (tokens->type != GgufValueType::kArray || tokens->elem_type != GgufValueType::kString)
    k.fail("tokenizer.ggml.tokens", "must be an array of strings");
  if (tokens->count == 0 || tokens->count > (uint64_t(1) << 31) - 1)
    k.fail("tokenizer.ggml.tokens", "has " + std::to_string(tokens->count) + " entries");
  c.vocab_size = int64_t(tokens->count);
  auto token_id = [&](const char* key, int64_t dflt) {
    if (!k.has(key)) return dflt;
    const int64_t id = k.raw().integer(key);
    if (id < 0 || id >= c.vocab_size)
      k.fail(key, "id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(c.vocab_size));
    return id;
  };
  c.pad_token_id = token_id("tokenizer.ggml.padding_token_id", 0);
  c.bos_token_id = token_id("tokenizer.ggml.bos_token_id", 2);
  if (k.has("tokenizer.ggml.eos_token_id")) c.eos_token_ids = {token_id("tokenizer.ggml.eos_token_id", 1)};
}

// The layers: type from the sliding pattern, heads per type, and the tensors
// each type implies (attn_v only on sliding layers: full layers take V from
// k_proj, docs/model.md §2.1).
void read_layers(const Keys& k, const std::vector<GgufTensorInfo>& tensors, const std::vector<float>* rope_freqs,
                 ModelConfig& c) {
  const std::string pattern_key = arch("attention.sliding_window_pattern");
  const std::vector<bool> sliding = k.raw().booleans(pattern_key);
  if (int64_t(sliding.size()) != c.num_layers)
    k.fail(pattern_key,
           "has " + std::to_string(sliding.size()) + " entries but block_count is " + std::to_string(c.num_layers));
  if (sliding.back()) k.fail(pattern_key, "the last layer must be a full-attention layer (false)");
  const std::string kv_key = arch("attention.head_count_kv");
  const std::vector<int64_t> kv = k.per_layer(kv_key, c.num_layers);
  c.head_dim = head_dim_of(k, "_swa");
  c.global_head_dim = head_dim_of(k, "");
  c.rope_sliding.type = "default";
  c.rope_sliding.theta = k.raw().number(arch("rope.freq_base_swa"));
  if (!(c.rope_sliding.theta > 1.0) || !std::isfinite(c.rope_sliding.theta))
    k.fail(arch("rope.freq_base_swa"), "must be > 1, got " + fmt(c.rope_sliding.theta));
  c.rope_full = full_rope(k, rope_freqs, c.global_head_dim);
  c.layers.resize(size_t(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerSpec& L = c.layers[size_t(i)];
    const bool is_sliding = sliding[size_t(i)];
    L.type = is_sliding ? LayerType::kSliding : LayerType::kFull;
    L.head_dim = is_sliding ? c.head_dim : c.global_head_dim;
    L.rope = is_sliding ? &c.rope_sliding : &c.rope_full;
    L.has_v_proj = is_sliding;
    L.num_kv_heads = int(kv[size_t(i)]);
    int& per_type = is_sliding ? c.num_kv_heads : c.num_global_kv_heads;
    if (per_type == 0) per_type = L.num_kv_heads;
    if (per_type != L.num_kv_heads)
      k.fail(kv_key, "layer " + std::to_string(i) + " has " + std::to_string(L.num_kv_heads) +
                         " KV heads, an earlier layer of its type " + std::to_string(per_type) +
                         "; dgemma needs one count per layer type");
    if (c.num_heads % L.num_kv_heads != 0)
      k.fail(kv_key, "head_count " + std::to_string(c.num_heads) + " is not divisible by layer " + std::to_string(i) +
                         "'s " + std::to_string(L.num_kv_heads) + " KV heads");
    const std::string blk = "blk." + std::to_string(i) + ".";
    const bool has_v = find_tensor(tensors, blk + "attn_v.weight") != nullptr;
    if (has_v != is_sliding)
      tensor_fail(k.raw(), blk + "attn_v.weight",
                  is_sliding ? "missing on sliding layer " + std::to_string(i)
                             : "present on full layer " + std::to_string(i) + " (full layers take V from attn_k; " +
                                   pattern_key + " says full)");
    check_norm_width(k.raw(), tensors, blk + "attn_q_norm.weight", L.head_dim);
    check_norm_width(k.raw(), tensors, blk + "attn_k_norm.weight", L.head_dim);
  }
}

// Every tensor must be one of the layout's, within block_count, and the
// embedding must match the hidden size and vocabulary.
void check_tensor_list(const Keys& k, const std::vector<GgufTensorInfo>& tensors, const ModelConfig& c) {
  for (const GgufTensorInfo& t : tensors) {
    if (t.name == kGgufRopeFreqsName) continue;
    const std::optional<std::string> canonical = gguf_to_canonical(t.name);
    if (!canonical)
      tensor_fail(k.raw(), t.name, "not a tensor of the DiffusionGemma GGUF layout (docs/formats.md §5.3)");
    if (t.name.rfind("blk.", 0) == 0) {
      const int64_t layer = std::stoll(t.name.substr(4));
      if (layer >= c.num_layers)
        tensor_fail(k.raw(), t.name,
                    "layer " + std::to_string(layer) + " is beyond block_count " + std::to_string(c.num_layers));
    }
  }
  const GgufTensorInfo* embd = find_tensor(tensors, "token_embd.weight");
  if (!embd) tensor_fail(k.raw(), "token_embd.weight", "missing");
  if (embd->ne.size() != 2 || embd->ne[0] != c.hidden_size || embd->ne[1] != c.vocab_size)
    tensor_fail(k.raw(), "token_embd.weight",
                "shape " + ne_string(embd->ne) + " does not match embedding_length " + std::to_string(c.hidden_size) +
                    " x " + std::to_string(c.vocab_size) + " tokens");
}

std::string file_type_name(const Keys& k) {
  if (!k.has("general.file_type")) return "gguf";
  static const std::map<int64_t, const char*> kNames = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},    {9, "Q5_1"},
      {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"},
      {17, "Q5_K_M"}, {18, "Q6_K"},   {25, "IQ4_NL"}, {30, "IQ4_XS"}, {32, "BF16"}};
  const int64_t ft = k.raw().integer("general.file_type");
  const auto it = kNames.find(ft);
  return it != kNames.end() ? std::string("gguf ") + it->second : "gguf file_type " + std::to_string(ft);
}

}  // namespace

ModelConfig gguf_model_config(const GgufKeys& keys, const std::vector<GgufTensorInfo>& tensors,
                              const std::vector<float>* rope_freqs) {
  const Keys k(keys);
  const std::string_view architecture = keys.string("general.architecture");
  if (architecture != kArchitecture)
    k.fail("general.architecture", "unsupported architecture \"" + std::string(architecture) + "\" (expected \"" +
                                       std::string(kArchitecture) + "\")");
  ModelConfig c;
  c.source = keys.source();
  c.model_type = "diffusion_gemma";
  c.dtype = file_type_name(k);
  refuse_variants(k);
  read_dimensions(k, c);
  read_tokens(k, c);
  read_layers(k, tensors, rope_freqs, c);
  check_tensor_list(k, tensors, c);
  return c;
}

GgufSamplerDefaults gguf_sampler_defaults(const GgufKeys& keys) {
  const Keys k(keys);
  GgufSamplerDefaults s;
  auto integer = [&](const char* key, int64_t min) -> std::optional<int64_t> {
    if (!k.has(key)) return std::nullopt;
    const int64_t v = keys.integer(key);
    if (v < min) k.fail(key, "must be >= " + std::to_string(min) + ", got " + std::to_string(v));
    return v;
  };
  auto number = [&](const char* key, bool zero_ok) -> std::optional<double> {
    if (!k.has(key)) return std::nullopt;
    const double v = keys.number(key);
    if (!std::isfinite(v) || v < 0.0 || (!zero_ok && v == 0.0))
      k.fail(key, std::string("must be ") + (zero_ok ? ">= 0" : "> 0") + ", got " + fmt(v));
    return v;
  };
  s.max_denoising_steps = integer("diffusion.eb_max_steps", 1);
  s.stability_threshold = integer("diffusion.eb_stability_threshold", 0);
  s.t_min = number("diffusion.eb_t_min", true);
  s.t_max = number("diffusion.eb_t_max", false);
  s.entropy_bound = number("diffusion.eb_entropy_bound", false);
  s.confidence_threshold = number("diffusion.eb_confidence_threshold", false);
  return s;
}

std::vector<float> gguf_rope_freq_factors(int head_dim, int rotated_pairs) {
  std::vector<float> f(size_t(head_dim / 2), kGgufUnrotatedFreqFactor);
  for (int i = 0; i < rotated_pairs && i < head_dim / 2; ++i) f[size_t(i)] = 1.0f;
  return f;
}

}  // namespace dgemma

#include "checkpoint/config.h"

#include <cmath>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma {
namespace {

class Fields {
 public:
  Fields(const json::Value& obj, std::string prefix, std::string source)
      : obj_(obj), prefix_(std::move(prefix)), source_(std::move(source)) {}

  std::string where(const std::string& key) const { return source_ + ": " + prefix_ + key; }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const { throw Error(where(key) + ": " + why); }
  const json::Value* get(const std::string& key) const {
    const json::Value* v = obj_.find(key);
    return (v && !v->is_null()) ? v : nullptr;
  }
  const json::Value& require(const std::string& key) const {
    const json::Value* v = get(key);
    if (!v) throw Error(where(key) + ": required field is missing");
    return *v;
  }
  int64_t positive_int(const std::string& key) const {
    int64_t v = require(key).as_int(where(key));
    if (v <= 0) fail(key, "must be positive, got " + std::to_string(v));
    if (v > (int64_t(1) << 40)) fail(key, "value " + std::to_string(v) + " is implausibly large");
    return v;
  }
  int64_t int_or(const std::string& key, int64_t dflt) const {
    const json::Value* v = get(key);
    return v ? v->as_int(where(key)) : dflt;
  }
  double number_or(const std::string& key, double dflt) const {
    const json::Value* v = get(key);
    return v ? v->as_double(where(key)) : dflt;
  }
  std::string string_or(const std::string& key, const std::string& dflt) const {
    const json::Value* v = get(key);
    return v ? v->as_string(where(key)) : dflt;
  }
  bool bool_or(const std::string& key, bool dflt) const {
    const json::Value* v = get(key);
    return v ? v->as_bool(where(key)) : dflt;
  }
  const std::string& prefix() const { return prefix_; }
  const std::string& source() const { return source_; }
  // Whether the key is there with the value null (get() treats that as absent).
  bool is_null(const std::string& key) const {
    const json::Value* v = obj_.find(key);
    return v && v->is_null();
  }

 private:
  const json::Value& obj_;
  std::string prefix_;
  std::string source_;
};

std::string fmt(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

RopeSpec parse_rope(const Fields& tf, const json::Value& rp, const std::string& key) {
  std::string path = "rope_parameters." + key;
  if (!rp.is_object()) tf.fail(path, std::string("expected an object, got ") + json::kind_name(rp.kind()));
  Fields f(rp, tf.prefix() + path + ".", tf.source());
  RopeSpec r;
  r.type = f.string_or("rope_type", "default");
  if (r.type != "default" && r.type != "proportional")
    f.fail("rope_type", "unsupported RoPE type \"" + r.type + "\" (supported: default, proportional)");
  r.theta = f.number_or("rope_theta", 10000.0);
  if (!(r.theta > 1.0) || !std::isfinite(r.theta)) f.fail("rope_theta", "must be > 1, got " + fmt(r.theta));
  r.partial_rotary_factor = f.number_or("partial_rotary_factor", 1.0);
  if (!(r.partial_rotary_factor > 0.0 && r.partial_rotary_factor <= 1.0))
    f.fail("partial_rotary_factor", "must be in (0, 1], got " + fmt(r.partial_rotary_factor));
  if (r.type == "default" && r.partial_rotary_factor != 1.0)
    f.fail("partial_rotary_factor",
           "only the \"proportional\" RoPE type supports a partial factor, got " + fmt(r.partial_rotary_factor));
  return r;
}

// The object holding the text model's fields: text_config for the full
// model, the top level itself for a text-only config.
const json::Value& text_config_of(const json::Value& root, const Fields& top, const std::string& model_type) {
  const json::Value* text_cfg = top.get("text_config");
  if (model_type == "diffusion_gemma") {
    if (!text_cfg) top.fail("text_config", "required for model_type \"diffusion_gemma\"");
  } else if (model_type == "diffusion_gemma_text") {
    text_cfg = &root;
  } else {
    top.fail("model_type", "expected \"diffusion_gemma\" (or \"diffusion_gemma_text\"), got \"" + model_type +
                               "\"; this engine runs DiffusionGemma checkpoints only");
  }
  if (!text_cfg->is_object()) top.fail("text_config", "must be an object");
  return *text_cfg;
}

// The text model's dimensions and numeric constants.
void parse_dimensions(const Fields& t, ModelConfig& c) {
  c.vocab_size = t.positive_int("vocab_size");
  if (c.vocab_size > (int64_t(1) << 31) - 1) t.fail("vocab_size", "exceeds int32 token ids");
  c.hidden_size = int(t.positive_int("hidden_size"));
  c.num_layers = int(t.positive_int("num_hidden_layers"));
  c.num_heads = int(t.positive_int("num_attention_heads"));
  c.num_kv_heads = int(t.positive_int("num_key_value_heads"));
  c.head_dim = int(t.positive_int("head_dim"));
  c.sliding_window = int(t.positive_int("sliding_window"));
  c.intermediate_size = int(t.positive_int("intermediate_size"));
  c.moe_intermediate_size = int(t.positive_int("moe_intermediate_size"));
  c.num_experts = int(t.positive_int("num_experts"));
  c.top_k_experts = int(t.positive_int("top_k_experts"));
  c.rms_norm_eps = t.number_or("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0.0) || c.rms_norm_eps > 1.0)
    t.fail("rms_norm_eps", "must be in (0, 1], got " + fmt(c.rms_norm_eps));
  // Absent: the reference's class default, 30 (a config saved with only its
  // non-default fields omits it); null or 0: no cap (docs/model.md §1.1).
  c.final_logit_softcapping = t.is_null("final_logit_softcapping") ? 0.0 : t.number_or("final_logit_softcapping", 30.0);
  if (c.final_logit_softcapping < 0.0 || !std::isfinite(c.final_logit_softcapping))
    t.fail("final_logit_softcapping", "must be >= 0, got " + fmt(c.final_logit_softcapping));
}

// Special token ids, the dtype, the canvas and the vision extras, each read
// from the top level or the text config as published checkpoints place them.
void parse_tokens_and_extras(const Fields& top, const Fields& t, ModelConfig& c) {
  c.pad_token_id = t.int_or("pad_token_id", top.int_or("pad_token_id", 0));
  c.bos_token_id = t.int_or("bos_token_id", top.int_or("bos_token_id", 2));
  c.dtype = top.string_or("dtype", top.string_or("torch_dtype", t.string_or("dtype", "")));
  c.image_token_id = top.int_or("image_token_id", -1);
  c.boi_token_id = top.int_or("boi_token_id", -1);
  c.eoi_token_id = top.int_or("eoi_token_id", -1);
  c.vision_soft_tokens_per_image = top.int_or("vision_soft_tokens_per_image", 0);
  c.canvas_length = int(top.get("canvas_length") ? top.positive_int("canvas_length") : 256);
  if (t.get("max_position_embeddings")) c.max_position_embeddings = t.positive_int("max_position_embeddings");
  if (const json::Value* eos = top.get("eos_token_id") ? top.get("eos_token_id") : t.get("eos_token_id")) {
    if (eos->is_array()) {
      for (const auto& e : eos->as_array()) c.eos_token_ids.push_back(e.as_int(top.source() + ": eos_token_id[]"));
    } else {
      c.eos_token_ids.push_back(eos->as_int(top.source() + ": eos_token_id"));
    }
  }
}

// Features of the Gemma 4 family that DiffusionGemma does not use; refuse
// rather than silently compute something else (docs/model.md §1.1 "absent flags").
void refuse_absent_features(const Fields& t) {
  std::string act = t.string_or("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    t.fail("hidden_activation", "unsupported activation \"" + act + "\" (DiffusionGemma uses gelu_pytorch_tanh)");
  if (t.bool_or("attention_bias", false)) t.fail("attention_bias", "true is not supported (the model has no biases)");
  if (t.int_or("hidden_size_per_layer_input", 0) != 0)
    t.fail("hidden_size_per_layer_input", "per-layer inputs are not supported by DiffusionGemma");
  if (t.int_or("num_kv_shared_layers", 0) != 0)
    t.fail("num_kv_shared_layers", "KV sharing across layers is not supported by DiffusionGemma");
  if (t.get("enable_moe_block") && !t.bool_or("enable_moe_block", true))
    t.fail("enable_moe_block", "false is not supported: every DiffusionGemma layer has an MoE block");
  if (t.get("attention_k_eq_v") && !t.bool_or("attention_k_eq_v", true))
    t.fail("attention_k_eq_v", "false is not supported: full layers share K and V (docs/model.md §2.1)");
  std::string bidir = t.string_or("use_bidirectional_attention", "vision");
  if (bidir != "vision") {
    t.fail("use_bidirectional_attention",
           "value \"" + bidir + "\" is not supported (text-only DiffusionGemma uses \"vision\": causal encoder)");
  }
}

// RoPE parameters per layer type.
void parse_rope_parameters(const Fields& t, ModelConfig& c) {
  const json::Value& rp = t.require("rope_parameters");
  if (!rp.is_object()) t.fail("rope_parameters", "must be an object keyed by layer type");
  const json::Value* rs = rp.find("sliding_attention");
  const json::Value* rf = rp.find("full_attention");
  if (!rs) t.fail("rope_parameters.sliding_attention", "required field is missing");
  if (!rf) t.fail("rope_parameters.full_attention", "required field is missing");
  c.rope_sliding = parse_rope(t, *rs, "sliding_attention");
  c.rope_full = parse_rope(t, *rf, "full_attention");
}

// Layer i's type and the shape its type implies, before overrides.
void set_layer_type(const Fields& t, const std::string& key, const std::string& s, ModelConfig& c, LayerSpec& L) {
  if (s == "sliding_attention") {
    L.type = LayerType::kSliding;
    L.head_dim = c.head_dim;
    L.num_kv_heads = c.num_kv_heads;
    L.has_v_proj = true;
    L.rope = &c.rope_sliding;
  } else if (s == "full_attention") {
    L.type = LayerType::kFull;
    L.head_dim = c.global_head_dim;
    L.num_kv_heads = c.num_global_kv_heads;
    L.has_v_proj = false;
    L.rope = &c.rope_full;
  } else {
    t.fail(key, "unknown layer type \"" + s + "\" (expected sliding_attention or full_attention)");
  }
}

// A full-attention layer's shape must be known; the first one found also
// fills the model-wide global values when the flat keys are absent.
void check_full_layer(const Fields& t, int i, const LayerSpec& L, ModelConfig& c) {
  if (L.head_dim == 0)
    t.fail("global_head_dim", "missing: full-attention layer " + std::to_string(i) +
                                  " needs global_head_dim or per_layer_config." + std::to_string(i) + ".head_dim");
  if (L.num_kv_heads == 0)
    t.fail("num_global_key_value_heads", "missing: full-attention layer " + std::to_string(i) +
                                             " needs num_global_key_value_heads or per_layer_config." +
                                             std::to_string(i) + ".num_key_value_heads");
  if (c.global_head_dim == 0) c.global_head_dim = L.head_dim;
  if (c.num_global_kv_heads == 0) c.num_global_kv_heads = L.num_kv_heads;
}

// What every layer's shape must satisfy for attention and RoPE.
void check_layer_shape(const Fields& t, const std::string& key, int i, const LayerSpec& L, const ModelConfig& c) {
  if (L.head_dim % 2 != 0)
    t.fail(key,
           "layer " + std::to_string(i) + " head dim " + std::to_string(L.head_dim) + " must be even (RoPE pairs)");
  if (c.num_heads % L.num_kv_heads != 0)
    t.fail(key, "num_attention_heads " + std::to_string(c.num_heads) + " is not divisible by layer " +
                    std::to_string(i) + "'s " + std::to_string(L.num_kv_heads) + " key/value heads");
  if (L.rope->type == "proportional" && L.rope->rotated_pairs(L.head_dim) < 1)
    t.fail("rope_parameters", "partial_rotary_factor rotates no pair at head dim " + std::to_string(L.head_dim));
}

// The per-layer specs: layer_types, the full-layer overrides (flat keys of
// the published checkpoint, or per_layer_config), and their checks
// (docs/model.md §1.1: last layer full attention).
void parse_layers(const Fields& t, ModelConfig& c) {
  const json::Value& lt = t.require("layer_types");
  const auto& arr = lt.as_array(t.where("layer_types"));
  if (int(arr.size()) != c.num_layers)
    t.fail("layer_types",
           "has " + std::to_string(arr.size()) + " entries but num_hidden_layers is " + std::to_string(c.num_layers));

  parse_rope_parameters(t, c);

  const json::Value* gh = t.get("global_head_dim");
  const json::Value* gk = t.get("num_global_key_value_heads");
  c.global_head_dim = gh ? int(t.positive_int("global_head_dim")) : 0;
  c.num_global_kv_heads = gk ? int(t.positive_int("num_global_key_value_heads")) : 0;
  const json::Value* plc = t.get("per_layer_config");
  if (plc && !plc->is_object()) t.fail("per_layer_config", "must be an object keyed by layer index");

  c.layers.resize(size_t(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string key = "layer_types[" + std::to_string(i) + "]";
    LayerSpec& L = c.layers[size_t(i)];
    set_layer_type(t, key, arr[size_t(i)].as_string(t.where(key)), c, L);
    if (plc) {
      if (const json::Value* o = plc->find(std::to_string(i))) {
        Fields f(*o, t.prefix() + "per_layer_config." + std::to_string(i) + ".", t.source());
        if (f.get("head_dim")) L.head_dim = int(f.positive_int("head_dim"));
        if (f.get("num_key_value_heads")) L.num_kv_heads = int(f.positive_int("num_key_value_heads"));
      }
    }
    if (L.type == LayerType::kFull) check_full_layer(t, i, L, c);
    check_layer_shape(t, key, i, L, c);
  }
  if (c.layers.back().type != LayerType::kFull)
    t.fail("layer_types", "the last layer must be full_attention (got sliding_attention at index " +
                              std::to_string(c.num_layers - 1) + ")");
}

// A size of the tower: positive when given, 0 when the key is absent (then
// read off the tensors, docs/model.md §7.1).
int optional_size(const Fields& v, const std::string& key) { return v.get(key) ? int(v.positive_int(key)) : 0; }

// The vision tower's block (docs/model.md §7.1). Features the tower's code
// supports in other Gemma 4 checkpoints but DiffusionGemma's does not use
// are refused rather than computed wrongly.
void parse_vision(const Fields& top, ModelConfig& c) {
  const json::Value* vc = top.get("vision_config");
  c.has_vision_config = vc != nullptr;
  c.vision_tower = c.has_vision_config;
  if (!vc) return;
  if (!vc->is_object()) top.fail("vision_config", "must be an object");
  Fields v(*vc, "vision_config.", top.source());
  VisionConfig& t = c.vision;
  t.hidden_size = int(v.positive_int("hidden_size"));
  t.num_layers = int(v.positive_int("num_hidden_layers"));
  t.num_heads = int(v.positive_int("num_attention_heads"));
  t.head_dim = int(v.positive_int("head_dim"));
  t.patch_size = int(v.positive_int("patch_size"));
  t.pooling_kernel_size = int(v.positive_int("pooling_kernel_size"));
  t.intermediate_size = optional_size(v, "intermediate_size");
  t.num_kv_heads = optional_size(v, "num_key_value_heads");
  t.position_embedding_size = optional_size(v, "position_embedding_size");
  if (v.get("standardize")) t.standardize = v.bool_or("standardize", false);
  t.default_output_length = v.int_or("default_output_length", 0);
  t.rms_norm_eps = v.number_or("rms_norm_eps", 1e-6);
  if (!(t.rms_norm_eps > 0.0) || t.rms_norm_eps > 1.0)
    v.fail("rms_norm_eps", "must be in (0, 1], got " + fmt(t.rms_norm_eps));
  if (t.head_dim % 4 != 0)
    v.fail("head_dim", "must be a multiple of 4 (2-D RoPE rotates two halves of split-half pairs), got " +
                           std::to_string(t.head_dim));
  if (t.num_kv_heads > 0 && t.num_heads % t.num_kv_heads != 0)
    v.fail("num_key_value_heads",
           std::to_string(t.num_kv_heads) + " does not divide num_attention_heads " + std::to_string(t.num_heads));
  if (const json::Value* rp = v.get("rope_parameters")) {
    if (!rp->is_object()) v.fail("rope_parameters", "must be an object");
    Fields r(*rp, "vision_config.rope_parameters.", top.source());
    const std::string type = r.string_or("rope_type", "default");
    if (type != "default")
      r.fail("rope_type", "unsupported RoPE type \"" + type + "\" for the vision tower (supported: default)");
    t.rope_theta = r.number_or("rope_theta", 100.0);
    if (!(t.rope_theta > 1.0) || !std::isfinite(t.rope_theta))
      r.fail("rope_theta", "must be > 1, got " + fmt(t.rope_theta));
  }
  const std::string act = v.string_or("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    v.fail("hidden_activation", "unsupported activation \"" + act + "\" (the vision tower uses gelu_pytorch_tanh)");
  if (v.bool_or("attention_bias", false)) v.fail("attention_bias", "true is not supported (the tower has no biases)");
  if (v.bool_or("use_clipped_linears", false))
    v.fail("use_clipped_linears", "true is not supported (clamped linears are not implemented; docs/model.md §7.1)");
}

}  // namespace

std::string VisionConfig::missing_keys() const {
  std::string s;
  auto add = [&](bool missing, const char* key) {
    if (missing) s += (s.empty() ? "" : ", ") + std::string(key);
  };
  add(intermediate_size <= 0, "intermediate_size");
  add(num_kv_heads <= 0, "num_key_value_heads");
  add(position_embedding_size <= 0, "position_embedding_size");
  add(!standardize.has_value(), "standardize");
  return s;
}

int RopeSpec::rotated_pairs(int head_dim) const {
  if (type == "proportional") return int(std::floor(partial_rotary_factor * head_dim / 2.0));
  return head_dim / 2;
}

void point_layer_ropes(ModelConfig& c) {
  for (LayerSpec& L : c.layers) L.rope = L.type == LayerType::kFull ? &c.rope_full : &c.rope_sliding;
}

ModelConfig load_model_config(const std::string& path) { return parse_model_config(read_text_file(path), path); }

ModelConfig parse_model_config(const std::string& text, const std::string& source) {
  json::ParseOptions po;
  po.source = source;
  json::Value root = json::parse(text, po);
  if (!root.is_object()) throw Error(source + ": top level must be a JSON object");

  ModelConfig c;
  c.source = source;
  Fields top(root, "", source);
  c.model_type = top.string_or("model_type", "");
  const json::Value& text_cfg = text_config_of(root, top, c.model_type);
  Fields t(text_cfg, &text_cfg == &root ? "" : "text_config.", source);

  parse_dimensions(t, c);
  parse_tokens_and_extras(top, t, c);
  refuse_absent_features(t);
  parse_vision(top, c);
  if (c.top_k_experts > c.num_experts)
    t.fail("top_k_experts", std::to_string(c.top_k_experts) + " exceeds num_experts " + std::to_string(c.num_experts));
  parse_layers(t, c);
  return c;
}

}  // namespace dgemma

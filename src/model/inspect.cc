#include "model/inspect.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint_source.h"
#include "core/format.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace dgemma {

uint64_t kv_cache_bytes(const ModelConfig& c, int64_t context) {
  uint64_t b = 0;
  for (const LayerSpec& L : c.layers) {
    int64_t rows = L.type == LayerType::kSliding ? std::min<int64_t>(context, c.sliding_window - 1) : context;
    b += uint64_t(2) * uint64_t(rows) * uint64_t(L.num_kv_heads) * uint64_t(L.head_dim) * sizeof(float);
  }
  return b;
}

CheckpointReport inspect_checkpoint(const std::string& dir, int64_t context) {
  CheckpointReport r;
  r.dir = dir;
  r.context = context;
  CheckpointSource src = open_checkpoint(dir);
  r.config = std::move(src.config);
  point_layer_ropes(r.config);
  const TensorStore& store = src.store;
  r.files = store.files().size() + store.gguf_parts().size();
  r.file_format = src.is_gguf() ? "GGUF" : "safetensors";
  r.stored_tensors = store.names().size();
  BindOptions bo;
  bo.verify_tied_copies = false;  // inspection reads no weight data
  ModelWeights w = bind_weights(r.config, store, bo);
  for (const BoundTensor& b : w.bound) {
    int64_t n = 1;
    for (int64_t d : b.expected.shape) n *= d;
    const std::string comp = component_name(b.expected.component);
    r.parameters_total += n;
    r.parameters_by_component[comp] += n;
    r.bytes_by_component[comp] += b.nbytes;
    // Stored form: a quantized weight counts under its scheme ("nf4", ...).
    r.bytes_by_dtype[b.storage.empty() ? std::string(dtype_name(b.dtype)) : b.storage] += b.nbytes;
    r.weight_bytes += b.nbytes;
    if (!b.expected.aliases.empty()) {
      std::vector<std::string> g = {b.expected.name};
      g.insert(g.end(), b.expected.aliases.begin(), b.expected.aliases.end());
      r.tie_groups.push_back(std::move(g));
    }
    for (const auto& p : b.present)
      if (p != b.expected.name) r.aliases_stored.push_back(p);
  }
  r.skipped_tensors = w.skipped;
  r.skipped_bytes = w.skipped_bytes;
  r.kv_cache_bytes = kv_cache_bytes(r.config, context);
  // Logits, tempered logits and self-conditioning input [L, V] fp32, plus
  // per-layer activations of one canvas (a generous 64·H floats per row).
  const uint64_t L = uint64_t(r.config.canvas_length);
  r.workspace_bytes = 3 * L * uint64_t(r.config.vocab_size) * 4 + L * 64 * uint64_t(r.config.hidden_size) * 4;
  return r;
}

json::Value report_to_json(const CheckpointReport& r) {
  const ModelConfig& c = r.config;
  json::Value o = json::Object{};
  o.set("dir", r.dir);
  json::Value arch = json::Object{};
  arch.set("model_type", c.model_type);
  arch.set("vocab_size", c.vocab_size);
  arch.set("hidden_size", c.hidden_size);
  arch.set("num_layers", c.num_layers);
  json::Array types;
  for (const auto& L : c.layers)
    types.emplace_back(L.type == LayerType::kFull ? "full_attention" : "sliding_attention");
  arch.set("layer_types", std::move(types));
  arch.set("num_attention_heads", c.num_heads);
  arch.set("num_key_value_heads", c.num_kv_heads);
  arch.set("num_global_key_value_heads", c.num_global_kv_heads);
  arch.set("head_dim", c.head_dim);
  arch.set("global_head_dim", c.global_head_dim);
  arch.set("sliding_window", c.sliding_window);
  arch.set("intermediate_size", c.intermediate_size);
  arch.set("moe_intermediate_size", c.moe_intermediate_size);
  arch.set("num_experts", c.num_experts);
  arch.set("top_k_experts", c.top_k_experts);
  arch.set("canvas_length", c.canvas_length);
  arch.set("final_logit_softcapping", c.final_logit_softcapping);
  o.set("architecture", std::move(arch));
  o.set("files", int64_t(r.files));
  o.set("file_format", r.file_format);
  o.set("stored_tensors", int64_t(r.stored_tensors));
  o.set("parameters_total", r.parameters_total);
  json::Value pc = json::Object{};
  for (const auto& [k, v] : r.parameters_by_component) pc.set(k, v);
  o.set("parameters_by_component", std::move(pc));
  json::Value bc = json::Object{};
  for (const auto& [k, v] : r.bytes_by_component) bc.set(k, v);
  o.set("bytes_by_component", std::move(bc));
  json::Value bd = json::Object{};
  for (const auto& [k, v] : r.bytes_by_dtype) bd.set(k, v);
  o.set("bytes_by_dtype", std::move(bd));
  o.set("weight_bytes", r.weight_bytes);
  json::Array groups;
  for (const auto& g : r.tie_groups) {
    json::Array a;
    for (const auto& n : g) a.emplace_back(n);
    groups.emplace_back(std::move(a));
  }
  o.set("tie_groups", std::move(groups));
  json::Array stored;
  for (const auto& n : r.aliases_stored) stored.emplace_back(n);
  o.set("aliases_stored", std::move(stored));
  json::Array skipped;
  for (const auto& n : r.skipped_tensors) skipped.emplace_back(n);
  o.set("skipped_tensors", std::move(skipped));
  o.set("skipped_bytes", r.skipped_bytes);
  o.set("context", r.context);
  o.set("kv_cache_bytes", r.kv_cache_bytes);
  o.set("workspace_bytes", r.workspace_bytes);
  o.set("memory_estimate_bytes", r.weight_bytes + r.kv_cache_bytes + r.workspace_bytes);
  return o;
}

static std::string human_count(int64_t n) {
  char buf[64];
  if (n >= 1000000000)
    std::snprintf(buf, sizeof buf, "%.3f B", double(n) / 1e9);
  else if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.3f M", double(n) / 1e6);
  else if (n >= 1000)
    std::snprintf(buf, sizeof buf, "%.3f K", double(n) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%lld", (long long)n);
  return buf;
}

std::string report_to_text(const CheckpointReport& r) {
  const ModelConfig& c = r.config;
  std::string s;
  char line[512];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    s += line;
  };
  int n_full = 0;
  for (const auto& L : c.layers) n_full += L.type == LayerType::kFull;
  add("checkpoint      %s (%zu %s file%s, %zu tensors)\n", r.dir.c_str(), r.files, r.file_format.c_str(),
      r.files == 1 ? "" : "s", r.stored_tensors);
  add("model           %s, %d layers (%d sliding, %d full), hidden %d, vocab %lld\n", c.model_type.c_str(),
      c.num_layers, c.num_layers - n_full, n_full, c.hidden_size, (long long)c.vocab_size);
  add("attention       %d heads; sliding: %d kv heads x %d, window %d; full: %d kv heads x %d (K=V)\n", c.num_heads,
      c.num_kv_heads, c.head_dim, c.sliding_window, c.num_global_kv_heads, c.global_head_dim);
  add("feed-forward    dense %d; %d experts top-%d x %d\n", c.intermediate_size, c.num_experts, c.top_k_experts,
      c.moe_intermediate_size);
  add("canvas          %d tokens, logit soft-cap %g\n", c.canvas_length, c.final_logit_softcapping);
  if (c.vision_tower) {
    const VisionConfig& v = c.vision;
    add("vision          %d layers, hidden %d, %d heads x %d, MLP %d, patch %d, pooling %d, %s\n", v.num_layers,
        v.hidden_size, v.num_heads, v.head_dim, v.intermediate_size, v.patch_size, v.pooling_kernel_size,
        v.standardize.value_or(false) ? "standardized" : "not standardized");
  } else if (c.has_vision_config) {
    add("vision          none stored (the config has a vision_config; images are refused)\n");
  }
  add("\n");
  add("%-20s %16s %14s\n", "component", "parameters", "bytes");
  for (const auto& [k, v] : r.parameters_by_component)
    add("%-20s %16s %14s\n", k.c_str(), human_count(v).c_str(), human_bytes(r.bytes_by_component.at(k)).c_str());
  add("%-20s %16s %14s\n\n", "total", human_count(r.parameters_total).c_str(), human_bytes(r.weight_bytes).c_str());
  add("%-20s %14s\n", "dtype", "bytes");
  for (const auto& [k, v] : r.bytes_by_dtype) add("%-20s %14s\n", k.c_str(), human_bytes(v).c_str());
  add("\ntie groups      %zu (decoder tensors canonical; %zu alias copies stored in the files)\n", r.tie_groups.size(),
      r.aliases_stored.size());
  add("skipped         %zu unused tensors (%s; audio, or vision without a tower)\n", r.skipped_tensors.size(),
      human_bytes(r.skipped_bytes).c_str());
  add("\nmemory at context %lld: weights %s + KV cache %s + workspace %s = %s\n", (long long)r.context,
      human_bytes(r.weight_bytes).c_str(), human_bytes(r.kv_cache_bytes).c_str(),
      human_bytes(r.workspace_bytes).c_str(),
      human_bytes(r.weight_bytes + r.kv_cache_bytes + r.workspace_bytes).c_str());
  return s;
}

}  // namespace dgemma

#include "quantize/export_gguf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "checkpoint/config.h"
#include "checkpoint/gguf_config.h"
#include "checkpoint/gguf_names.h"
#include "checkpoint/tensor_names.h"
#include "dgemma/error.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "quantize/export_format.h"
#include "quantize/ggml_blocks.h"
#include "quantize/ggml_quantize.h"
#include "quantize/page_release.h"
#include "quantize/quant_context.h"
#include "quantize/quantizers.h"
#include "quantize/resolve.h"

namespace dgemma {
namespace {

namespace fs = std::filesystem;

constexpr const char* kArch = "diffusion-gemma";

std::string arch_key(const std::string& k) { return std::string(kArch) + "." + k; }

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// One output tensor: its GGUF name, dimensions innermost first, and where
// its values come from (a checkpoint weight, or the rope_freqs values).
struct OutTensor {
  std::string name;
  std::vector<int64_t> ne;
  WeightRef ref;              // checkpoint weight (ref.data null for rope_freqs)
  std::vector<float> values;  // rope_freqs
  GgmlType type = GgmlType::kF32;
  uint64_t input_bytes = 0;
};

// The expected tensor as the engine binds it: quantized (dequantized row by
// row here) or plain.
WeightRef resolve_weight(const std::string& in_dir, const TensorStore& store, const std::optional<QuantContext>& ctx,
                         const ExpectedTensor& ex, uint64_t& bytes) {
  if (ctx)
    if (std::optional<WeightRef> r = resolve_quantized(*ctx, ex)) {
      bytes = r->quant->stored_bytes;
      return *r;
    }
  std::vector<std::string> names = {ex.name};
  names.insert(names.end(), ex.aliases.begin(), ex.aliases.end());
  for (const std::string& n : names)
    if (const TensorView* v = store.find(n)) {
      if (v->shape() != ex.shape)
        throw Error(in_dir + ": tensor " + n + " has shape " + shape_string(v->shape()) + ", expected " +
                    shape_string(ex.shape));
      if (v->dtype() != DType::kBF16 && v->dtype() != DType::kF16 && v->dtype() != DType::kF32)
        throw Error(in_dir + ": tensor " + n + " is " + std::string(dtype_name(v->dtype())) +
                    "; a GGUF export reads BF16, F16 or F32 weights (or a quantized checkpoint)");
      WeightRef r;
      r.name = ex.name;
      r.dtype = v->dtype();
      r.shape = v->shape();
      r.data = v->data;
      bytes = v->nbytes();
      return r;
    }
  throw Error(in_dir + ": tensor " + ex.name + " is missing");
}

// Rows [r0, r0 + n) of the weight as fp32.
void read_rows(const WeightRef& ref, int64_t cols, int64_t r0, int64_t n, float* out) {
  if (ref.quant) {
    for (int64_t r = 0; r < n; ++r) dequantize_reference(*ref.quant, r0 + r, 0, cols, out + r * cols);
    return;
  }
  quant::FloatSource src{ref.dtype, ref.data, product(ref.shape)};
  src.read(r0 * cols, n * cols, out);
  release_mapped_pages(static_cast<const uint8_t*>(ref.data) + r0 * cols * (dtype_bits(ref.dtype) / 8),
                       uint64_t(n * cols) * uint64_t(dtype_bits(ref.dtype) / 8));
}

// "26B-A4B": total and (with experts) active parameters, in billions or
// millions.
std::string size_label(uint64_t total, uint64_t active) {
  auto pretty = [](uint64_t n) {
    char buf[32];
    if (n >= 1000000000)
      std::snprintf(buf, sizeof buf, "%.0fB", double(n) / 1e9);
    else
      std::snprintf(buf, sizeof buf, "%.0fM", double(n) / 1e6);
    return std::string(buf);
  };
  return active < total ? pretty(total) + "-A" + pretty(active) : pretty(total);
}

void add_model_keys(GgufStreamWriter& w, const ModelConfig& c, const GgufExportOptions& o, uint64_t total,
                    uint64_t active) {
  // docs/formats.md §5.3: the published keys with their value types.
  w.add_string("general.architecture", kArch);
  w.add_string("general.type", "model");
  w.add_string("general.name", o.name.empty() ? "DiffusionGemma" : o.name);
  w.add_string("general.size_label", size_label(total, active));
  w.add_u32("general.quantization_version", 2);
  w.add_u32("general.file_type", uint32_t(o.ftype));
  w.add_u32(arch_key("block_count"), uint32_t(c.num_layers));
  w.add_u32(arch_key("context_length"), uint32_t(c.max_position_embeddings));
  w.add_u32(arch_key("embedding_length"), uint32_t(c.hidden_size));
  w.add_u32(arch_key("feed_forward_length"), uint32_t(c.intermediate_size));
  w.add_u32(arch_key("attention.head_count"), uint32_t(c.num_heads));
  std::vector<int32_t> kv;
  std::vector<bool> sliding;
  for (const LayerSpec& l : c.layers) {
    kv.push_back(int32_t(l.num_kv_heads));
    sliding.push_back(l.type == LayerType::kSliding);
  }
  w.add_array(arch_key("attention.head_count_kv"), kv);
  w.add_f32(arch_key("rope.freq_base"), float(c.rope_full.theta));
  w.add_f32(arch_key("rope.freq_base_swa"), float(c.rope_sliding.theta));
  w.add_f32(arch_key("attention.layer_norm_rms_epsilon"), float(c.rms_norm_eps));
  w.add_u32(arch_key("expert_count"), uint32_t(c.num_experts));
  w.add_u32(arch_key("expert_used_count"), uint32_t(c.top_k_experts));
  w.add_u32(arch_key("attention.key_length"), uint32_t(c.global_head_dim));
  w.add_u32(arch_key("attention.value_length"), uint32_t(c.global_head_dim));
  w.add_u32(arch_key("attention.key_length_swa"), uint32_t(c.head_dim));
  w.add_u32(arch_key("attention.value_length_swa"), uint32_t(c.head_dim));
  w.add_u32(arch_key("expert_feed_forward_length"), uint32_t(c.moe_intermediate_size));
  w.add_f32(arch_key("final_logit_softcapping"), float(c.final_logit_softcapping));
  w.add_u32(arch_key("attention.sliding_window"), uint32_t(c.sliding_window));
  w.add_array(arch_key("attention.sliding_window_pattern"), sliding);
  w.add_u32(arch_key("rope.dimension_count"), uint32_t(c.global_head_dim));
  w.add_u32(arch_key("rope.dimension_count_swa"), uint32_t(c.head_dim));
  w.add_bool(arch_key("attention.causal"), false);
  w.add_u32(arch_key("attention.shared_kv_layers"), 0);
  w.add_u32(arch_key("embedding_length_per_layer_input"), 0);
  w.add_u32("diffusion.canvas_length", uint32_t(c.canvas_length));
}

void add_tokenizer_keys(GgufStreamWriter& w, const GgufTokenizerData& t, int64_t vocab) {
  // docs/formats.md §5.4.
  const size_t n = t.tokens.size();
  if (int64_t(n) != vocab)
    throw Error("GGUF export: the tokenizer has " + std::to_string(n) + " tokens, the model's vocabulary " +
                std::to_string(vocab));
  if (!t.token_types.empty() && t.token_types.size() != n)
    throw Error("GGUF export: " + std::to_string(t.token_types.size()) + " token types for " + std::to_string(n) +
                " tokens");
  if (!t.scores.empty() && t.scores.size() != n)
    throw Error("GGUF export: " + std::to_string(t.scores.size()) + " token scores for " + std::to_string(n) +
                " tokens");
  w.add_string("tokenizer.ggml.model", t.model);
  w.add_array("tokenizer.ggml.tokens", t.tokens);
  w.add_array("tokenizer.ggml.scores", t.scores.empty() ? std::vector<float>(n, 0.0f) : t.scores);
  w.add_array("tokenizer.ggml.token_type", t.token_types.empty() ? std::vector<int32_t>(n, 1) : t.token_types);
  w.add_array("tokenizer.ggml.merges", t.merges);
  const std::pair<const char*, int32_t> ids[] = {{"tokenizer.ggml.bos_token_id", t.bos_id},
                                                 {"tokenizer.ggml.eos_token_id", t.eos_id},
                                                 {"tokenizer.ggml.unknown_token_id", t.unknown_id},
                                                 {"tokenizer.ggml.padding_token_id", t.padding_id},
                                                 {"tokenizer.ggml.mask_token_id", t.mask_id}};
  for (const auto& [key, id] : ids) {
    if (id < 0) continue;
    if (id >= int32_t(n))
      throw Error("GGUF export: " + std::string(key) + " " + std::to_string(id) + " is outside the vocabulary");
    w.add_u32(key, uint32_t(id));
  }
  if (!t.chat_template.empty()) w.add_string("tokenizer.chat_template", t.chat_template);
  w.add_bool("tokenizer.ggml.add_space_prefix", t.add_space_prefix);
  w.add_bool("tokenizer.ggml.add_bos_token", t.add_bos);
}

}  // namespace

GgufExportReport export_gguf(const std::string& in_dir, const std::string& out_file, const GgufExportOptions& o) {
  const ModelConfig config = load_model_config((fs::path(in_dir) / "config.json").string());
  const TensorStore store = TensorStore::open_dir(in_dir);
  const std::optional<QuantContext> ctx = detect_quantization(store);
  GgufExportReport report;
  report.out_file = out_file;

  // The tensors in the published order: rope_freqs, then the expected
  // tensors (token embedding, layers in order, final norm,
  // self-conditioning); tied copies are not written (docs/formats.md §5.5).
  std::vector<OutTensor> outs;
  {
    OutTensor rope;
    rope.name = std::string(kGgufRopeFreqsName);
    rope.values =
        gguf_rope_freq_factors(config.global_head_dim, config.rope_full.rotated_pairs(config.global_head_dim));
    rope.ne = {int64_t(rope.values.size())};
    outs.push_back(std::move(rope));
  }
  uint64_t total = 0, experts = 0;
  int stored_used = 0;
  for (const ExpectedTensor& ex : expected_tensors(config)) {
    const std::optional<std::string> name = canonical_to_gguf(ex.name);
    if (!name) continue;
    OutTensor t;
    t.name = *name;
    t.ne.assign(ex.shape.rbegin(), ex.shape.rend());
    t.ref = resolve_weight(in_dir, store, ctx, ex, t.input_bytes);
    stored_used += t.ref.quant ? int(t.ref.quant->stored_names.size()) : 1;
    report.input_bytes += t.input_bytes;
    total += uint64_t(product(ex.shape));
    if (ex.component == Component::kExperts) experts += uint64_t(product(ex.shape));
    outs.push_back(std::move(t));
  }
  report.dropped = std::max(0, int(store.names().size()) - stored_used);
  for (const std::string& n : store.names())
    if (is_vision_tensor(n)) {
      ++report.vision_dropped;
      report.vision_bytes += store.find(n)->nbytes();
    }
  const uint64_t active =
      config.num_experts > 0 ? total - experts + experts / uint64_t(config.num_experts) * uint64_t(config.top_k_experts)
                             : total;

  std::vector<quant::GgufTypeTensor> plan;
  plan.reserve(outs.size());
  for (const OutTensor& t : outs) plan.push_back({t.name, t.ne});
  quant::GgufTypeModel model;
  model.n_layer = config.num_layers;
  model.n_expert = config.num_experts;
  model.n_gqa = config.layers.empty() ? 1 : config.num_heads / std::max(1, config.layers.front().num_kv_heads);
  const std::vector<GgmlType> types = quant::gguf_tensor_types(o.ftype, plan, model);

  GgufStreamWriter w;
  add_model_keys(w, config, o, total, active);
  add_tokenizer_keys(w, o.tokenizer, config.vocab_size);
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i].type = types[i];
    w.declare(outs[i].name, outs[i].type, outs[i].ne);
    (ggml_is_block(outs[i].type) ? report.quantized : report.plain) += 1;
  }
  w.begin(out_file);

  double err2 = 0, ref2 = 0;
  uint64_t done = 0;
  std::vector<float> rows, back;
  std::vector<uint8_t> bytes;
  for (const OutTensor& t : outs) {
    const int64_t cols = t.ne[0], nrows = product(t.ne) / cols;
    const uint64_t row_bytes = ggml_row_bytes(t.type, cols);
    const int64_t chunk = std::max<int64_t>(1, quant::kChunkElems / cols);
    for (int64_t r0 = 0; r0 < nrows; r0 += chunk) {
      const int64_t n = std::min(chunk, nrows - r0);
      rows.resize(size_t(n * cols));
      if (t.ref.data)
        read_rows(t.ref, cols, r0, n, rows.data());
      else
        std::copy(t.values.begin() + r0 * cols, t.values.begin() + (r0 + n) * cols, rows.begin());
      bytes.resize(size_t(uint64_t(n) * row_bytes));
      quant::ggml_quantize_rows(t.type, rows.data(), n, cols, bytes.data(), o.threads);
      if (ggml_is_block(t.type)) {  // the error of what was written
        back.resize(rows.size());
        for (int64_t r = 0; r < n; ++r)
          quant::ggml_decode_row(t.type, bytes.data() + uint64_t(r) * row_bytes, 0, cols, back.data() + r * cols);
        for (size_t i = 0; i < rows.size(); ++i) {
          err2 += (double(rows[i]) - back[i]) * (double(rows[i]) - back[i]);
          ref2 += double(rows[i]) * rows[i];
        }
      }
      w.write(t.name, bytes.data(), bytes.size(), uint64_t(r0) * row_bytes);
    }
    done += t.input_bytes;
    if (o.progress) o.progress(done, report.input_bytes, t.name);
  }
  w.finish();
  report.output_bytes = fs::file_size(out_file);
  report.rel_rms = ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0;
  return report;
}

}  // namespace dgemma

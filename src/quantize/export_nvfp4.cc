// `dgemma quantize --format nvfp4-experts`: ModelOpt NVFP4 for the routed
// experts only (docs/formats.md §3), each fused expert tensor split into the
// per-expert linears ModelOpt writes.
#include <filesystem>
#include <optional>
#include <string>

#include "core/file_io.h"
#include "dgemma/error.h"
#include "quantize/export_format.h"
#include "quantize/expert_input_scales.h"
#include "quantize/page_release.h"

namespace dgemma::quant {
namespace {

// Fused expert tensor -> per-expert linears (docs/formats.md §3.2): fn(module,
// first source row, rows, cols).
template <class Fn>
void for_each_expert_linear(const Item& it, Fn&& fn) {
  const std::string& name = it.src->name();
  const std::string base = name.substr(0, name.rfind('.') + 1);
  const bool gate_up = ends_with(name, "gate_up_proj");
  const int64_t E = it.ex->shape[0], rows = it.ex->shape[1], cols = it.ex->shape[2];
  for (int64_t e = 0; e < E; ++e) {
    const std::string pre = base + std::to_string(e) + ".";
    if (gate_up) {
      fn(pre + "gate_proj", e * rows, rows / 2, cols);
      fn(pre + "up_proj", e * rows + rows / 2, rows / 2, cols);
    } else {
      fn(pre + "down_proj", e * rows, rows, cols);
    }
  }
}

// The layer of a fused expert tensor "….layers.<L>.experts.…".
int64_t layer_of(const std::string& name) {
  const size_t at = name.find("layers.");
  if (at == std::string::npos) throw Error(name + ": no layer index in the expert tensor's name");
  return std::stoll(name.substr(at + 7));
}

class Nvfp4ExpertsWriter : public FormatWriter {
 public:
  explicit Nvfp4ExpertsWriter(const ExportOptions& o) : o_(o) {
    if (o.expert_inputs) scales_ = expert_input_scales(*o.expert_inputs, o.per_expert_input_scales);
  }

  bool quantizes(const ExpectedTensor& ex, const TensorView& /*v*/, Item& /*item*/) const override {
    return ex.component == Component::kExperts && ex.shape.size() == 3 && ex.shape[2] % 16 == 0 &&
           ex.shape[1] % 32 == 0;
  }

  void declare(const Item& it, SafetensorsStreamWriter& w) const override {
    for_each_expert_linear(it, [&](const std::string& m, int64_t, int64_t rows, int64_t cols) {
      w.declare(m + ".weight", DType::kU8, {rows, cols / 2});
      w.declare(m + ".weight_scale", DType::kF8_E4M3, {rows, cols / 16});
      w.declare(m + ".weight_scale_2", DType::kF32, {});
      if (calibrated()) w.declare(m + ".input_scale", DType::kF32, {});
    });
  }

  void produce(const Item& it, SafetensorsStreamWriter& w) const override {
    const TensorView& v = *it.src;
    const quant::FloatSource src = source_of(v);
    const bool gate_up = ends_with(v.name(), "gate_up_proj");
    const int64_t rows = it.ex->shape[1], cols = it.ex->shape[2];
    const int64_t layer = calibrated() ? checked_layer(it) : 0;
    float g = 1.0f;
    for_each_expert_linear(it, [&](const std::string& m, int64_t row0, int64_t r, int64_t c) {
      // Gate and up of an expert share weight_scale_2 (docs/formats.md §3.3).
      if (!gate_up || ends_with(m, "gate_proj"))
        g = quant::nvfp4_global_scale(quant::abs_max(src, row0 * cols, (gate_up ? rows : r) * cols));
      quant::Nvfp4Packed p = quant::quantize_nvfp4(src, row0, r, c, g, o_.threads);
      w.write(m + ".weight", p.codes.data(), p.codes.size());
      w.write(m + ".weight_scale", p.scales.data(), p.scales.size());
      w.write(m + ".weight_scale_2", &p.global_scale, 4);
      if (calibrated()) {
        const size_t at = size_t(layer * scales_->num_experts + row0 / (gate_up ? rows : r));
        w.write(m + ".input_scale", gate_up ? &scales_->gate_up[at] : &scales_->down[at], 4);
      }
      const uint64_t esize = uint64_t(dtype_bits(v.dtype()) / 8);
      release_mapped_pages(v.data + uint64_t(row0 * c) * esize, uint64_t(r * c) * esize);
    });
  }

  // hf_quant_config.json and quantization_config with quant_method
  // "modelopt" (docs/formats.md §3.4): W4A4 "NVFP4" when calibrated, else the
  // weight-only "W4A16_NVFP4" (no input_activations, no input_scale).
  void write_config(json::Value& cfg, const std::vector<Item>& /*items*/, const std::string& out_dir) const override {
    json::Array exclude = {json::Value("lm_head"), json::Value("*embed_tokens*"), json::Value("*self_attn*"),
                           json::Value("*mlp*"),   json::Value("*router*"),       json::Value("*self_conditioning*"),
                           json::Value("*vision*")};
    const char* algo = calibrated() ? "NVFP4" : "W4A16_NVFP4";
    json::Value producer = json::Object{};
    producer.set("name", "modelopt");
    if (calibrated()) {
      const ExpertActivationRanges& r = *o_.expert_inputs;
      producer.set("version", "dgemma-ptq (weights round to nearest; expert inputs calibrated, max)");
      json::Value set = json::Object{};
      set.set("sha256", r.sha256);
      set.set("samples", r.samples);
      set.set("max_seq_len", r.max_seq_len);
      set.set("tokens", r.tokens);
      set.set("passes", r.passes);
      if (!r.precision.empty()) set.set("precision", r.precision);
      set.set("input_scales", o_.per_expert_input_scales ? "per-expert" : "per-layer");
      producer.set("calibration", set);
    } else {
      producer.set("version", "dgemma-ptq (weights round to nearest; weight-only, no calibration)");
    }
    json::Value hq = json::Object{};
    hq.set("quant_algo", algo);
    if (o_.kv_cache_fp8)
      hq.set("kv_cache_quant_algo", "FP8");
    else
      hq.set("kv_cache_quant_algo", nullptr);
    hq.set("group_size", 16);
    hq.set("exclude_modules", exclude);
    json::Value hf = json::Object{};
    hf.set("producer", producer);
    hf.set("quantization", hq);
    write_file_atomically((std::filesystem::path(out_dir) / "hf_quant_config.json").string(), json::dump(hf, 4) + "\n");
    json::Value scheme = json::Object{};
    scheme.set("dynamic", false);
    scheme.set("num_bits", 4);
    scheme.set("type", "float");
    scheme.set("group_size", 16);
    json::Value group = json::Object{};
    if (calibrated()) group.set("input_activations", scheme);
    group.set("weights", scheme);
    group.set("targets", json::Array{json::Value("Linear")});
    json::Value groups = json::Object{};
    groups.set("group_0", group);
    json::Value q = json::Object{};
    q.set("config_groups", groups);
    q.set("ignore", exclude);
    q.set("quant_algo", algo);
    if (o_.kv_cache_fp8) {
      json::Value kv = json::Object{};
      kv.set("dynamic", false);
      kv.set("num_bits", 8);
      kv.set("type", "float");
      q.set("kv_cache_scheme", kv);
    }
    q.set("producer", producer);
    q.set("quant_method", "modelopt");
    cfg.set("quantization_config", q);
  }

 private:
  bool calibrated() const { return scales_.has_value(); }
  // The item's layer, checked against the calibrated ranges.
  int64_t checked_layer(const Item& it) const {
    const int64_t layer = layer_of(it.src->name());
    const ExpertActivationRanges& r = *o_.expert_inputs;
    if (layer < 0 || layer >= r.num_layers || it.ex->shape[0] != r.num_experts)
      throw Error(it.src->name() + ": layer " + std::to_string(layer) + " with " + std::to_string(it.ex->shape[0]) +
                  " experts is outside the calibrated ranges (" + std::to_string(r.num_layers) + " layers of " +
                  std::to_string(r.num_experts) + " experts)");
    return layer;
  }

  const ExportOptions& o_;
  std::optional<ExpertInputScales> scales_;
};

}  // namespace

std::unique_ptr<FormatWriter> make_nvfp4_experts_writer(const ExportOptions& options) {
  return std::make_unique<Nvfp4ExpertsWriter>(options);
}

}  // namespace dgemma::quant

// `dgemma quantize --format nf4`: bitsandbytes NF4 with double quantization
// (docs/formats.md §2), in bitsandbytes' own tensor names and quant state.
#include <algorithm>
#include <vector>

#include "dgemma/error.h"
#include "quantize/export_format.h"
#include "quantize/format_tables.h"
#include "quantize/page_release.h"

namespace dgemma::quant {
namespace {

std::string torch_dtype_name(DType t) {
  switch (t) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    default: return "float32";
  }
}

// The bitsandbytes quant_state JSON (docs/formats.md §2.1), padded with trailing
// spaces to `reserve` bytes when given (its length must be known before the
// nested offset is).
std::string nf4_state_json(const TensorView& v, bool dq, float offset, size_t reserve) {
  json::Value s = json::Object{};
  s.set("quant_type", "nf4");
  s.set("blocksize", 64);
  s.set("dtype", torch_dtype_name(v.dtype()));
  json::Array shape;
  for (int64_t d : v.shape()) shape.emplace_back(d);
  s.set("shape", shape);
  if (dq) {
    s.set("nested_blocksize", 256);
    s.set("nested_dtype", "float32");
    s.set("nested_offset", double(offset));
  }
  std::string text = json::dump(s);
  if (reserve) {
    if (text.size() > reserve) throw Error("internal: NF4 quant state longer than reserved");
    text.append(reserve - text.size(), ' ');
  }
  return text;
}

size_t nf4_state_reserve(const TensorView& v, bool dq) {
  return nf4_state_json(v, dq, -1.2345678901234567e-30f, 0).size() + 16;
}

class Nf4Writer : public FormatWriter {
 public:
  explicit Nf4Writer(const ExportOptions& o) : o_(o) {}

  // Attention, dense MLP, self-conditioning and the experts; embeddings and
  // the router's projection when asked.
  bool quantizes(const ExpectedTensor& ex, const TensorView& /*v*/, Item& /*item*/) const override {
    const Component c = ex.component;
    const bool router_proj = c == Component::kRouter && ends_with(ex.name, "router.proj.weight");
    return c == Component::kAttention || c == Component::kDenseMlp || c == Component::kSelfConditioning ||
           c == Component::kExperts || (c == Component::kEmbedding && o_.quantize_embeddings) ||
           (router_proj && o_.quantize_router);
  }

  void declare(const Item& it, SafetensorsStreamWriter& w) const override {
    const TensorView& v = *it.src;
    const std::string& name = v.name();
    const int64_t n = v.numel(), nb = (n + 63) / 64;
    const bool dq = o_.nf4_double_quant;
    w.declare(name, DType::kU8, {(n + 1) / 2, 1});
    w.declare(name + ".absmax", dq ? DType::kU8 : DType::kF32, {nb});
    w.declare(name + ".quant_map", DType::kF32, {16});
    if (dq) {
      w.declare(name + ".nested_absmax", DType::kF32, {(nb + 255) / 256});
      w.declare(name + ".nested_quant_map", DType::kF32, {256});
    }
    w.declare(name + ".quant_state.bitsandbytes__nf4", DType::kU8, {int64_t(nf4_state_reserve(v, dq))});
  }

  void produce(const Item& it, SafetensorsStreamWriter& w) const override {
    const TensorView& v = *it.src;
    const std::string& name = v.name();
    const int64_t n = v.numel();
    const bool dq = o_.nf4_double_quant;
    std::vector<float> absmax;
    absmax.reserve(size_t((n + 63) / 64));
    for (int64_t i0 = 0; i0 < n; i0 += kChunkElems) {
      const int64_t cnt = std::min(kChunkElems, n - i0);
      quant::Nf4Packed p = quant::quantize_nf4(source_of(v, i0, cnt), 64, false, 256, o_.threads);
      w.write(name, p.codes.data(), p.codes.size(), uint64_t(i0 / 2));
      absmax.insert(absmax.end(), p.absmax.begin(), p.absmax.end());
      release_mapped_pages(v.data + size_t(i0) * size_t(dtype_bits(v.dtype()) / 8),
                           uint64_t(cnt) * uint64_t(dtype_bits(v.dtype()) / 8));
    }
    quant::Nf4Packed p;
    if (dq) {
      quant::nf4_double_quantize(absmax, 256, p);
      w.write(name + ".absmax", p.absmax_codes.data(), p.absmax_codes.size());
      w.write(name + ".nested_absmax", p.nested_absmax.data(), p.nested_absmax.size() * 4);
      w.write(name + ".nested_quant_map", quant::bnb_dynamic_map(), 256 * 4);
    } else {
      w.write(name + ".absmax", absmax.data(), absmax.size() * 4);
    }
    w.write(name + ".quant_map", quant::kNf4Values, 16 * 4);
    const std::string state = nf4_state_json(v, dq, p.nested_offset, nf4_state_reserve(v, dq));
    w.write(name + ".quant_state.bitsandbytes__nf4", state.data(), state.size());
  }

  // quantization_config with quant_method "bitsandbytes" (docs/formats.md §2.1).
  void write_config(json::Value& cfg, const std::vector<Item>& /*items*/,
                    const std::string& /*out_dir*/) const override {
    json::Value q = json::Object{};
    q.set("quant_method", "bitsandbytes");
    q.set("load_in_4bit", true);
    q.set("load_in_8bit", false);
    q.set("_load_in_4bit", true);
    q.set("_load_in_8bit", false);
    q.set("bnb_4bit_quant_type", "nf4");
    q.set("bnb_4bit_use_double_quant", o_.nf4_double_quant);
    q.set("bnb_4bit_compute_dtype", "bfloat16");
    q.set("bnb_4bit_quant_storage", "uint8");
    json::Array skip = {json::Value("lm_head"), json::Value("vision_tower"), json::Value("embed_vision")};
    if (!o_.quantize_embeddings) skip.emplace_back("embed_tokens");
    if (!o_.quantize_router) skip.emplace_back("router");
    q.set("llm_int8_skip_modules", skip);
    q.set("llm_int8_threshold", 6.0);
    q.set("llm_int8_has_fp16_weight", false);
    q.set("llm_int8_enable_fp32_cpu_offload", false);
    cfg.set("quantization_config", q);
  }

 private:
  const ExportOptions& o_;
};

}  // namespace

std::unique_ptr<FormatWriter> make_nf4_writer(const ExportOptions& options) {
  return std::make_unique<Nf4Writer>(options);
}

}  // namespace dgemma::quant

// `dgemma quantize --format mlx4`: MLX affine quantization with mlx-vlm's
// DiffusionGemma recipe (docs/formats.md §4): 8 bits for attention and the
// dense MLP, 4 for the experts and self-conditioning, groups of 64 (32 where
// 64 does not divide a row).
#include <algorithm>

#include "quantize/export_format.h"
#include "quantize/page_release.h"

namespace dgemma::quant {
namespace {

DType scale_dtype(const TensorView& v) { return v.dtype() == DType::kF32 ? DType::kF32 : v.dtype(); }

class MlxWriter : public FormatWriter {
 public:
  explicit MlxWriter(const ExportOptions& o) : o_(o) {}

  // mlx-vlm's diffusion_gemma quant_predicate (docs/formats.md §4.4).
  bool quantizes(const ExpectedTensor& ex, const TensorView& /*v*/, Item& item) const override {
    const Component c = ex.component;
    const bool router_proj = c == Component::kRouter && ends_with(ex.name, "router.proj.weight");
    int bits = 0;
    if (c == Component::kAttention || c == Component::kDenseMlp)
      bits = 8;
    else if (c == Component::kExperts || c == Component::kSelfConditioning)
      bits = 4;
    else if (c == Component::kEmbedding && o_.quantize_embeddings)
      bits = 8;
    else if (router_proj && o_.quantize_router)
      bits = 8;
    const int64_t cols = ex.shape.back();
    const int group = cols % 64 == 0 ? 64 : cols % 32 == 0 ? 32 : 0;
    if (bits == 0 || group == 0) return false;
    item.bits = bits;
    item.group = group;
    return true;
  }

  void declare(const Item& it, SafetensorsStreamWriter& w) const override {
    const TensorView& v = *it.src;
    const std::string p = module_of(v.name());
    std::vector<int64_t> ws = v.shape(), ss = v.shape();
    ws.back() = ws.back() * it.bits / 32;
    ss.back() = ss.back() / it.group;
    w.declare(p + ".weight", DType::kU32, ws);
    w.declare(p + ".scales", scale_dtype(v), ss);
    w.declare(p + ".biases", scale_dtype(v), ss);
  }

  void produce(const Item& it, SafetensorsStreamWriter& w) const override {
    const TensorView& v = *it.src;
    const std::string p = module_of(v.name());
    const int64_t cols = v.shape().back(), rows = v.numel() / cols;
    const int64_t step = std::max<int64_t>(1, kChunkElems / cols);
    const DType sd = scale_dtype(v);
    const uint64_t ssize = sd == DType::kF32 ? 4 : 2;
    for (int64_t r0 = 0; r0 < rows; r0 += step) {
      const int64_t r = std::min(step, rows - r0);
      quant::AffinePacked q =
          quant::quantize_affine(source_of(v, r0 * cols, r * cols), r, cols, it.bits, it.group, sd, o_.threads);
      w.write(p + ".weight", q.codes.data(), q.codes.size(), uint64_t(r0 * cols * it.bits / 8));
      const uint64_t at = uint64_t(r0 * (cols / it.group)) * ssize;
      w.write(p + ".scales", q.scales.data(), q.scales.size(), at);
      w.write(p + ".biases", q.biases.data(), q.biases.size(), at);
      const uint64_t esize = uint64_t(dtype_bits(v.dtype()) / 8);
      release_mapped_pages(v.data + uint64_t(r0 * cols) * esize, uint64_t(r * cols) * esize);
    }
  }

  // `quantization` with per-module overrides and its `quantization_config`
  // copy (docs/formats.md §4.3).
  void write_config(json::Value& cfg, const std::vector<Item>& items, const std::string& /*out_dir*/) const override {
    json::Value q = json::Object{};
    q.set("group_size", 64);
    q.set("bits", 4);
    q.set("mode", "affine");
    for (const Item& it : items) {
      if (it.action != Action::kQuantize || (it.bits == 4 && it.group == 64)) continue;
      json::Value p = json::Object{};
      p.set("group_size", it.group);
      p.set("bits", it.bits);
      q.set(module_of(it.src->name()), p);
    }
    cfg.set("quantization", q);
    cfg.set("quantization_config", q);
  }

  const char* file_format() const override { return "mlx"; }

 private:
  const ExportOptions& o_;
};

}  // namespace

std::unique_ptr<FormatWriter> make_mlx_writer(const ExportOptions& options) {
  return std::make_unique<MlxWriter>(options);
}

}  // namespace dgemma::quant

#pragma once
// `dgemma quantize`: streaming post-training quantization of a plain (BF16,
// F16 or F32) checkpoint folder into one of the quantized layouts this engine
// reads, written in that format's own tensor names, dtypes and config entries
// (docs/formats.md §2-§4) so the format owner's loader can read it too:
//
//   nf4            bitsandbytes NF4 + double quant (blocksize 64, nested 256):
//                  attention, dense MLP, self-conditioning and the fused
//                  experts (the latter in bitsandbytes' parametrize layout: the
//                  same keys on the 3-D parameter; transformers' BitsAndBytes
//                  path itself never quantizes fused experts, §2.5).
//                  config.json gets quantization_config (quant_method
//                  "bitsandbytes").
//   nvfp4-experts  ModelOpt NVFP4, experts only (§3.1): every fused expert
//                  tensor is split into per-expert gate/up/down linears with
//                  weight, weight_scale (E4M3), weight_scale_2 (gate and up of
//                  an expert share it) and input_scale; everything else stays
//                  as stored. Writes hf_quant_config.json and
//                  config.json quantization_config (quant_method "modelopt").
//                  With calibrated expert input ranges (calibrate/, §3.5) it
//                  is W4A4 ("NVFP4", input_scale = amax / 2688); without,
//                  the weight-only "W4A16_NVFP4" with no input_scale.
//   mlx4           MLX affine with mlx-vlm's DiffusionGemma recipe (§4.4):
//                  attention and dense MLP 8-bit, experts and self-conditioning
//                  4-bit, group 64 (32 where 64 does not divide a row);
//                  config.json gets `quantization` (with per-module overrides)
//                  and its `quantization_config` copy; file metadata
//                  format "mlx".
//
// Embeddings, norms, the router and layer scalars stay unquantized unless
// asked (quantize_embeddings, quantize_router; NF4 and MLX only). Tied alias
// copies (encoder text weights, lm_head) are dropped: the decoder copy is
// canonical (docs/formats.md §0.1). Vision/audio tensors are copied through.
// Tensors are processed one at a time (and large ones in row chunks) and
// written straight into place, so memory stays at a few chunks whatever the
// model size.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "quantize/expert_activation_ranges.h"
#include "quantize/quantized_weight.h"

namespace dgemma {

enum class ExportFormat { kNf4, kNvfp4Experts, kMlx4 };

// One row per ExportFormat, in enum order: the `--format` spelling and the
// scheme the written weights are read back as. Its writer is
// make_*_writer in export_format.h.
struct ExportFormatInfo {
  ExportFormat format;
  std::string_view name;
  QuantScheme scheme;
};
inline constexpr std::array<ExportFormatInfo, 3> kExportFormats = {{
    {ExportFormat::kNf4, "nf4", QuantScheme::kNF4},
    {ExportFormat::kNvfp4Experts, "nvfp4-experts", QuantScheme::kNVFP4},
    {ExportFormat::kMlx4, "mlx4", QuantScheme::kAffine},
}};
const ExportFormatInfo& export_format_info(ExportFormat f);

std::optional<ExportFormat> parse_export_format(std::string_view name);
std::string_view export_format_name(ExportFormat f);
// The accepted names, for messages: "nf4, nvfp4-experts or mlx4".
std::string export_format_names();

struct ExportOptions {
  ExportFormat format = ExportFormat::kNf4;
  bool quantize_embeddings = false;
  bool quantize_router = false;
  bool nf4_double_quant = true;
  int threads = 0;  // quantizer threads (0: every hardware thread; quantizers.h)
  // nvfp4-experts: the calibrated input ranges of the routed experts
  // (docs/formats.md §3.5); null: the weight-only variant. Not owned.
  const ExpertActivationRanges* expert_inputs = nullptr;
  // Each expert its own input_scale from the tokens routed to it (experts no
  // token reached take their layer's), rather than one per layer and
  // projection shared by all experts as ModelOpt writes (docs/formats.md §3.5).
  bool per_expert_input_scales = false;
  // nvfp4-experts: declare the KV cache FP8 with a constant scale, as
  // hf_ptq's default --kv_cache_qformat fp8_cast does (no scale tensors;
  // docs/formats.md §3.4). A serving engine then keeps its KV cache in FP8.
  bool kv_cache_fp8 = true;
  // Called after each input tensor (bytes of input processed so far, total).
  std::function<void(uint64_t done, uint64_t total, const std::string& tensor)> progress;
};

struct ExportReport {
  std::string out_file;
  uint64_t input_bytes = 0, output_bytes = 0;
  int quantized = 0, copied = 0, dropped = 0;  // input tensors
  // The vision tower and embed_vision (docs/model.md §7.1): copied through
  // in the source's format, counted in `copied` too; their stored dtypes
  // ("BF16", "BF16+F32" when mixed). 0 / empty without a tower.
  int vision_copied = 0;
  uint64_t vision_bytes = 0;
  std::string vision_dtypes;
};

// Reads the checkpoint folder `in_dir` (config.json + safetensors) and writes
// `out_dir` (created if needed): model.safetensors, config.json and the other
// non-weight files of the input (tokenizer, generation config, ...).
ExportReport export_quantized(const std::string& in_dir, const std::string& out_dir, const ExportOptions& options);

// What export_quantized checks of its input before writing anything (the
// folder's config, that its weights are not quantized already, and that the
// options fit the format); throws dgemma::Error naming the problem. For
// callers with a long step before the export (calibration).
void check_export_input(const std::string& in_dir, const ExportOptions& options);

// Writes a plain F32 checkpoint of the weights as this engine binds them
// from `in_dir` (quantized or not), dequantized (quantize/quantized_weight.h):
// the reference a quantized model is compared with. Vision tensors are not
// written; config.json loses its quantization entries.
void export_dequantized(const std::string& in_dir, const std::string& out_dir);

}  // namespace dgemma

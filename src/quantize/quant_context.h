#pragma once
// Which quantization a checkpoint folder uses, and the format parameters the
// per-tensor readers need (docs/formats.md §7 decision table). The format is
// decided once per folder from its config files; whether a given tensor is
// quantized is decided per tensor from what the files contain (resolve.h).
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"
#include "io/safetensors.h"

namespace dgemma {

enum class CheckpointQuant { kNone, kBitsAndBytes, kModelOpt, kMlx, kGguf };

// One row per CheckpointQuant, in enum order: its name in messages. Its
// reader is chosen in resolve.cc.
struct CheckpointFormat {
  CheckpointQuant kind;
  std::string_view name;
};
inline constexpr std::array<CheckpointFormat, 5> kCheckpointFormats = {{
    {CheckpointQuant::kNone, "none"},
    {CheckpointQuant::kBitsAndBytes, "bitsandbytes-nf4"},
    {CheckpointQuant::kModelOpt, "modelopt-nvfp4"},
    {CheckpointQuant::kMlx, "mlx-affine"},
    {CheckpointQuant::kGguf, "gguf"},
}};
std::string_view checkpoint_quant_name(CheckpointQuant q);

// MLX affine parameters of one module (docs/formats.md §4.3).
struct MlxQuantParams {
  int group_size = 64;
  int bits = 4;
  std::string mode = "affine";
  bool quantized = true;  // false: a per-path `false` override
};

struct QuantContext {
  const TensorStore* store = nullptr;
  CheckpointQuant kind = CheckpointQuant::kNone;
  std::string source;  // the file (or tensor) the format was recognized from
  // Logical dtype of quantized weights whose format does not record one
  // (ModelOpt): config.json dtype/torch_dtype, else BF16.
  DType default_dtype = DType::kBF16;

  // MLX (docs/formats.md §4.3): top-level values and per-module-path overrides.
  // `mlx_from_config` false when the folder had no config entry (sniffed from
  // tensor names): parameters then come from the tensor shapes alone.
  bool mlx_from_config = false;
  MlxQuantParams mlx_default;
  std::vector<std::pair<std::string, MlxQuantParams>> mlx_overrides;

  // ModelOpt (docs/formats.md §3.4).
  std::string quant_algo;
  int group_size = 16;
  std::vector<std::string> exclude_patterns;  // fnmatch-style module patterns

  // The override for a module path: exact key, or a key that is a dotted
  // suffix of the path or has the path as a dotted suffix (converters may
  // prefix paths); nullptr when none.
  const MlxQuantParams* mlx_override(const std::string& module_path) const;
  // The exclude pattern matching a module path, or nullptr.
  const std::string* excluded_by(const std::string& module_path) const;
};

// A GGUF store (TensorStore::gguf_parts() not empty) is kGguf whatever its
// tensor types (docs/formats.md §5.3): its block tensors bind as ggml
// weights, the others plain. Else docs/formats.md §7, in its order: a top-level MLX `quantization` object first;
// then `quantization_config.quant_method` (bitsandbytes, modelopt) and
// hf_quant_config.json; without any config entry, tensor names that only a
// quantized checkpoint has (`*.quant_state.bitsandbytes__*`,
// `*.weight_scale_2`, `*.scales` next to `*.biases`). Reads config.json and
// hf_quant_config.json from store.dir(). nullopt: not quantized. Unsupported
// methods (bitsandbytes 8-bit, compressed-tensors, GPTQ/AWQ, MLX mxfp4/nvfp4
// modes, ModelOpt algorithms other than NVFP4) are errors naming the file,
// field and value.
std::optional<QuantContext> detect_quantization(const TensorStore& store);
// The same from already parsed documents (either may be null); `config_source`
// and `hf_source` name them in messages.
std::optional<QuantContext> detect_quantization(const TensorStore& store, const json::Value* config,
                                                const std::string& config_source, const json::Value* hf_quant_config,
                                                const std::string& hf_source);

// "bfloat16", "torch.float16", "float32" -> DType; nullopt otherwise.
std::optional<DType> torch_dtype_from_name(std::string_view name);

}  // namespace dgemma

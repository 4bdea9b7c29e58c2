#pragma once
// Binds checkpoint tensors to the model's weight slots (docs/model.md §4, docs/formats.md
// §0.1): decoder tensors are canonical, encoder text tensors and lm_head are
// aliases that may or may not be stored; layer_scalar buffers stay separate.
// All problems (missing, misshapen, conflicting, unexpected tensors) are
// collected and reported in one error.
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "checkpoint/config.h"
#include "checkpoint/tensor_names.h"
#include "core/tensor.h"
#include "model/vision_weights.h"
#include "quantize/load_quantize.h"

namespace dgemma {

struct LayerWeights {
  WeightRef input_layernorm, q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  WeightRef post_attention_layernorm, pre_feedforward_layernorm;
  WeightRef mlp_gate, mlp_up, mlp_down, post_feedforward_layernorm_1;
  WeightRef router_proj, router_scale, router_per_expert_scale;
  WeightRef pre_feedforward_layernorm_2, experts_gate_up, experts_down, post_feedforward_layernorm_2;
  WeightRef post_feedforward_layernorm;
  WeightRef decoder_layer_scalar, encoder_layer_scalar;
};

// How weights are held in memory.
enum class WeightPrecision {
  kAsStored,  // use the checkpoint dtype (zero-copy when aligned)
  kBF16,      // convert float weights to bf16 at load (product path)
};

struct BoundTensor {
  ExpectedTensor expected;
  std::string stored_as;             // name actually read (canonical or an alias)
  std::vector<std::string> present;  // every stored name of this tie group
  DType dtype = DType::kF32;         // the logical dtype (a quantized weight's original one)
  uint64_t nbytes = 0;               // bytes stored (quantized: codes + scales)
  std::string storage;               // how it is stored: the dtype name, or e.g. "nf4", "nvfp4", "affine4"
};

struct ModelWeights {
  WeightRef embed, final_norm;
  WeightRef sc_pre_norm, sc_gate, sc_up, sc_down;
  std::vector<LayerWeights> layers;
  VisionWeights vision;  // empty without a tower (docs/model.md §7.1)

  std::vector<BoundTensor> bound;    // one per expected tensor (text, then vision), in order
  std::vector<std::string> skipped;  // tensors stored but not read (audio, vision without a tower)
  uint64_t skipped_bytes = 0;
  std::deque<std::vector<uint8_t>> owned;  // converted or realigned copies
};

struct BindOptions {
  WeightPrecision precision = WeightPrecision::kAsStored;
  // Compare the bytes of tied copies stored on both sides (costs a read of
  // both; on by default, docs/formats.md §0.1).
  bool verify_tied_copies = true;
  // Quantize plain weights in memory as they are bound (quantize/load_quantize.h).
  LoadQuantization quantize = LoadQuantization::kNone;
  int threads = 0;  // quantize-at-load threads (0: every hardware thread)
  // Called after each expected tensor is bound (and quantized): elements
  // bound so far and in all, for a progress display. Optional.
  std::function<void(int64_t done, int64_t total)> progress;
};

ModelWeights bind_weights(const ModelConfig& config, const TensorStore& store, const BindOptions& options = {});

}  // namespace dgemma

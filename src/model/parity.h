#pragma once
// The parity tool's core (`dgemma forward`): runs the passes described by
// golden-style input files and returns every output in the golden naming and
// shapes (tests/data/golden_a, docs/reference-data.md "Tensor naming").
//   input_ids [1,T], position_ids      -> encoder pass into a fresh cache
//   decoder_input_ids [1,C], decoder_position_ids, optional
//   self_conditioning_logits [1,C,V]   -> one decoder pass over that cache
//   with input_ids also pixel_values [N,P,3·p²], image_position_ids
//   [N,P,2] (padding rows -1), mm_token_type_ids [1,T]
//                                      -> the encoder pass over a prompt with
//                                         N images (docs/model.md §7.6, §7.7)
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/diffusion_gemma.h"

namespace dgemma {

using NamedTensors = std::map<std::string, Tensor>;

struct ParityOptions {
  // Also what each layer's routed experts are fed ("<pass>.experts.<i>.input"
  // [1,T,H], ".down_input" [1,T,k,I]).
  bool expert_inputs = false;
  // The encoder's mask over images. Unset: the input file's case description
  // (the `mask_rule` of the .json next to it: hf_generate, google_jax or
  // hf_forward_causal), else the model's own option.
  std::optional<ImageMask> image_mask;
  // Merge the input file's own `vision.soft_tokens` [n_total, H] (split by
  // the runs of placeholder ids) instead of running the vision tower on
  // pixel_values: checks the merge and the masks apart from the tower.
  bool case_soft_tokens = false;
};

NamedTensors run_parity_inputs(DiffusionGemma& model, const std::vector<std::string>& input_files,
                               const ParityOptions& options);
inline NamedTensors run_parity_inputs(DiffusionGemma& model, const std::vector<std::string>& input_files,
                                      bool expert_inputs = false) {
  ParityOptions o;
  o.expert_inputs = expert_inputs;
  return run_parity_inputs(model, input_files, o);
}

// The mask rule of a golden case's `mask_rule` ("hf_generate" and the other
// spellings above, or hf / jax / causal); unset for an empty name.
std::optional<ImageMask> image_mask_of_case_rule(const std::string& rule);

// Writes F32 tensors as F32 and I32 tensors as I64 (the golden dtype of ids).
void write_named_tensors(const std::string& path, const NamedTensors& tensors);

}  // namespace dgemma

#pragma once
// The parity tool's core (`dgemma forward`): runs the passes described by
// golden-style input files and returns every output in the golden naming and
// shapes (tests/data/golden_a, docs/reference-data.md "Tensor naming").
//   input_ids [1,T], position_ids      -> encoder pass into a fresh cache
//   decoder_input_ids [1,C], decoder_position_ids, optional
//   self_conditioning_logits [1,C,V]   -> one decoder pass over that cache
#include <map>
#include <string>
#include <vector>

#include "model/diffusion_gemma.h"

namespace dgemma {

using NamedTensors = std::map<std::string, Tensor>;

// expert_inputs: also what each layer's routed experts are fed
// ("<pass>.experts.<i>.input" [1,T,H], ".down_input" [1,T,k,I]).
NamedTensors run_parity_inputs(DiffusionGemma& model, const std::vector<std::string>& input_files,
                               bool expert_inputs = false);

// Writes F32 tensors as F32 and I32 tensors as I64 (the golden dtype of ids).
void write_named_tensors(const std::string& path, const NamedTensors& tensors);

}  // namespace dgemma

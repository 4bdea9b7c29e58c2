// dgemma forward -m DIR --inputs FILE [--inputs FILE2] --out OUT.safetensors
#include <cstdio>

#include "cli.h"
#include "dgemma/error.h"
#include "model/parity.h"
#include "model/vision_parity.h"
#include "model_flags.h"

namespace dgemma::cli {
namespace {

int run_forward(const Args& args) {
  ModelFlags mf;
  std::vector<std::string> inputs;
  std::string out;
  bool expert_inputs = false;
  bool case_soft_tokens = false;
  FlagParser p("dgemma forward -m DIR --inputs FILE.safetensors [--inputs FILE2.safetensors] --out OUT.safetensors",
               "Parity tool: runs the passes described by the input files, in order, and writes every\n"
               "intermediate tensor by the golden naming (see tests/data/golden_a):\n"
               "  input_ids, position_ids -> encoder pass into a fresh cache\n"
               "    (encoder.embeddings, encoder.layer_in/out.{i}, encoder.router.{i}.*, encoder.last_hidden_state,\n"
               "     cache.{i}.keys/values)\n"
               "  decoder_input_ids, decoder_position_ids[, self_conditioning_logits] -> one decoder pass\n"
               "    (decoder.embeddings, decoder.self_conditioning_out, decoder.layer_in/out.{i},\n"
               "     decoder.router.{i}.*, decoder.last_hidden_state, decoder.logits)\n"
               "  pixel_values, image_position_ids (no input_ids) -> the vision tower on that one image\n"
               "    (vision.patch_embeddings, vision.layer_out.{l}, vision.pooled, vision.pooled_mask,\n"
               "     vision.standardized, vision.soft_tokens; padded to the case's shapes with zero rows:\n"
               "     compare the real patches with `dgemma compare --rows N`)\n"
               "With --expert-inputs also what each layer's routed experts are fed: <pass>.experts.{i}.input\n"
               "  [1,T,H] (the gate/up input) and <pass>.experts.{i}.down_input [1,T,k,I] (the down input of\n"
               "  each token's k experts, in router order), as PTQ calibration observes them.\n"
               "  with input_ids also pixel_values [N,P,D], image_position_ids [N,P,2] (padding -1) and\n"
               "  mm_token_type_ids -> the vision tower, then the encoder pass over a prompt with N images\n"
               "    (also vision.soft_tokens [n,H], encoder.merged_embeddings, encoder.mask.* [T,T];\n"
               "     docs/model.md §7.6, §7.7)\n"
               "The encoder's mask over images: --image-mask, else the case's `mask_rule` (FILE.json next to\n"
               "  the input), else hf.\n"
               "Compare the result with `dgemma compare`.");
  mf.add_to(p);
  p.add_strings("--inputs", &inputs, "input tensors (repeatable; processed in order)", "FILE");
  p.add_string("--out", &out, "output safetensors file", "FILE");
  p.add_bool("--expert-inputs", &expert_inputs, "also write the routed experts' inputs (see above)");
  p.add_bool("--case-soft-tokens", &case_soft_tokens,
             "merge the input's own vision.soft_tokens instead of running the vision tower");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw UsageError("forward: unexpected argument '" + p.positional()[0] + "'");
  if (inputs.empty()) throw UsageError("forward: give at least one --inputs FILE");
  if (out.empty()) throw UsageError("forward: give --out FILE");
  ParityOptions po;
  po.expert_inputs = expert_inputs;
  po.case_soft_tokens = case_soft_tokens;
  if (!mf.image_mask.empty()) po.image_mask = mf.options().image_mask;
  auto model = mf.load();
  // Vision cases run the tower alone; the others go through the text passes in order.
  std::vector<std::string> text_inputs, vision_inputs;
  for (const std::string& f : inputs)
    (is_vision_case(TensorStore::open_file(f)) ? vision_inputs : text_inputs).push_back(f);
  NamedTensors t = text_inputs.empty() ? NamedTensors{} : run_parity_inputs(*model, text_inputs, po);
  for (const std::string& f : vision_inputs)
    for (auto& [name, tensor] : run_vision_case(*model, f)) t[name] = std::move(tensor);
  write_named_tensors(out, t);
  std::fprintf(stderr, "wrote %zu tensors to %s\n", t.size(), out.c_str());
  return 0;
}

const Subcommand kForward("forward", "run encoder/decoder passes from golden-style inputs, write all intermediates",
                          run_forward);

}  // namespace
}  // namespace dgemma::cli

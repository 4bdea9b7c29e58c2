// dgemma forward -m DIR --inputs FILE [--inputs FILE2] --out OUT.safetensors
// dgemma forward -m DIR --image FILE --out OUT.safetensors
#include <cstdio>
#include <cstring>

#include "cli.h"
#include "dgemma/error.h"
#include "model/parity.h"
#include "model/vision_parity.h"
#include "image_inputs.h"
#include "io/safetensors.h"
#include "model_flags.h"

namespace dgemma::cli {
namespace {

// `dgemma forward --image FILE`: every stage of the processor and the tower
// under the golden names (docs/image.md §8.2, docs/reference-data.md).
void write_image_stages(DiffusionGemma& model, const std::string& dir, const std::string& file, const ImageFlags& flags,
                        const std::string& out) {
  const ImageProcessorConfig config = model_image_processor(model, dir);
  std::vector<PreprocessedImage> images = load_image_files({file}, config, flags.limits(), model.thread_pool());
  const PreprocessedImage& im = images[0];
  const PaddedVisionInput padded = pad_to_max_patches(im.input, config);
  SafetensorsWriter w;
  w.add("image.decoded", DType::kU8, {im.decoded.height, im.decoded.width, 3}, im.decoded.pixels.data());
  w.add("image.resized", DType::kU8, {im.resized.height, im.resized.width, 3}, im.resized.pixels.data());
  w.add_f32("pixel_values", padded.pixel_values.shape, padded.pixel_values.f.data());
  const std::vector<int64_t> positions(padded.positions.i.begin(), padded.positions.i.end());
  w.add("image_position_ids", DType::kI64, padded.positions.shape, positions.data());
  const int64_t n_soft = im.input.n_soft;
  w.add("num_soft_tokens", DType::kI64, {1}, &n_soft);
  const NamedTensors taps = run_vision_taps(model, im.input, config.max_patches());
  std::vector<std::vector<int64_t>> wide;  // keeps the I64 copies alive until write()
  wide.reserve(taps.size());
  for (const auto& [name, t] : taps) {
    if (t.dtype == DType::kF32) {
      w.add_f32(name, t.shape, t.f.data());
    } else {
      wide.emplace_back(t.i.begin(), t.i.end());
      w.add(name, DType::kI64, t.shape, wide.back().data());
    }
  }
  w.set_metadata("format", "pt");
  w.set_metadata("producer", "dgemma forward --image");
  w.write(out);
  std::fprintf(stderr,
               "%s: %lldx%lld decoded, %lldx%lld resized, %lld patches, %lld soft tokens; wrote %zu tensors to %s\n",
               file.c_str(), (long long)im.decoded.width, (long long)im.decoded.height, (long long)im.resized.width,
               (long long)im.resized.height, (long long)im.input.pixel_values.dim(0), (long long)n_soft,
               taps.size() + 5, out.c_str());
}

int run_forward(const Args& args) {
  ModelFlags mf;
  ImageFlags imf;
  std::vector<std::string> inputs;
  std::string out;
  bool expert_inputs = false;
  bool case_soft_tokens = false;
  FlagParser p(
      "dgemma forward -m DIR --inputs FILE.safetensors [--inputs FILE2.safetensors] --out OUT.safetensors\n"
      "       dgemma forward -m DIR --image FILE --out OUT.safetensors",
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
      "--image FILE (instead of --inputs): the picture through the model's processor and vision tower:\n"
      "  image.decoded, image.resized [H,W,3] U8, pixel_values [1,max_patches,3·p²] and\n"
      "  image_position_ids [1,max_patches,2] (padded as the reference processor pads: zero rows,\n"
      "  positions -1), num_soft_tokens [1], and the vision.* tensors above.\n"
      "Compare the result with `dgemma compare`.");
  mf.add_to(p);
  p.add_strings("--inputs", &inputs, "input tensors (repeatable; processed in order)", "FILE");
  p.add_string("--out", &out, "output safetensors file", "FILE");
  imf.add_to(p);
  p.add_bool("--expert-inputs", &expert_inputs, "also write the routed experts' inputs (see above)");
  p.add_bool("--case-soft-tokens", &case_soft_tokens,
             "merge the input's own vision.soft_tokens instead of running the vision tower");
  if (!p.parse(args)) return 0;
  if (!p.positional().empty()) throw UsageError("forward: unexpected argument '" + p.positional()[0] + "'");
  if (inputs.empty() == imf.files.empty())
    throw UsageError("forward: give at least one --inputs FILE, or one --image FILE (not both)");
  if (imf.files.size() > 1) throw UsageError("forward: --image takes one picture");
  if (out.empty()) throw UsageError("forward: give --out FILE");
  ParityOptions po;
  po.expert_inputs = expert_inputs;
  po.case_soft_tokens = case_soft_tokens;
  if (!mf.image_mask.empty()) po.image_mask = mf.options().image_mask;
  auto model = mf.load();
  if (!imf.files.empty()) {
    write_image_stages(*model, mf.model_dir, imf.files[0], imf, out);
    return 0;
  }
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

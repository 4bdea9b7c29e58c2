#include "model/parity.h"

#include <algorithm>
#include <filesystem>
#include <span>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/tensor_io.h"
#include "model/tap_recorder.h"
#include "model/vision_parity.h"

namespace dgemma {
namespace {

std::vector<int32_t> ids_of(const TensorStore& in, const std::string& name, const std::string& file) {
  const TensorView* v = in.find(name);
  if (!v) throw Error(file + ": tensor \"" + name + "\" is missing");
  Tensor t = tensor_from_view(*v);
  if (t.dtype != DType::kI32 || t.shape.size() != 2 || t.shape[0] != 1)
    throw Error(file + ": tensor \"" + name + "\" must be integer ids of shape [1, n], got " + t.shape_string());
  return t.i;
}

// Positions must continue the cache contiguously (the engine computes them).
void check_positions(const TensorStore& in, const std::string& name, const std::string& file, int64_t start, size_t n) {
  const TensorView* v = in.find(name);
  if (!v) return;
  Tensor p = tensor_from_view(*v);
  if (size_t(p.numel()) != n)
    throw Error(file + ": \"" + name + "\" has " + std::to_string(p.numel()) + " entries, expected " +
                std::to_string(n));
  for (size_t k = 0; k < n; ++k)
    if (p.i[k] != start + int64_t(k))
      throw Error(file + ": \"" + name + "\"[" + std::to_string(k) + "] = " + std::to_string(p.i[k]) + ", expected " +
                  std::to_string(start + int64_t(k)) + " (positions must continue the cache contiguously)");
}

// [n, ...] activations get the batch dimension of the golden files.
Tensor with_batch(const Tensor& t) {
  Tensor o = t;
  std::vector<int64_t> s = {1};
  s.insert(s.end(), t.shape.begin(), t.shape.end());
  o.shape = s;
  return o;
}

void take_taps(const TapRecorder& rec, NamedTensors& out) {
  for (const auto& [name, t] : rec.taps()) {
    if (name.find(".router.") != std::string::npos || name == "vision.soft_tokens" ||
        name.rfind("encoder.mask.", 0) == 0)
      out[name] = t;  // [T, k], [n, H] and [T, T], as the golden files
    else
      out[name] = with_batch(t);
  }
}

// Cache in the golden layout [1, kv_heads, S, head_dim].
void take_cache(const KvCache& cache, NamedTensors& out) {
  for (size_t li = 0; li < cache.layers.size(); ++li) {
    const LayerCache& lc = cache.layers[li];
    const int64_t S = lc.size(), Hk = lc.kv_heads, d = lc.head_dim;
    lc.keys.ensure_host();
    lc.values.ensure_host();
    Tensor k = Tensor::f32({1, Hk, S, d}), v = Tensor::f32({1, Hk, S, d});
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < Hk; ++h)
        for (int64_t j = 0; j < d; ++j) {
          k.f[size_t((h * S + s) * d + j)] = lc.keys.f[size_t((s * Hk + h) * d + j)];
          v.f[size_t((h * S + s) * d + j)] = lc.values.f[size_t((s * Hk + h) * d + j)];
        }
    out["cache." + std::to_string(li) + ".keys"] = std::move(k);
    out["cache." + std::to_string(li) + ".values"] = std::move(v);
  }
}

// The mask rule named by the case description next to `file` (FILE.json for
// FILE.safetensors), if there is one.
std::optional<ImageMask> case_mask_rule(const std::string& file) {
  std::filesystem::path json_path(file);
  json_path.replace_extension(".json");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(json_path, ec)) return std::nullopt;
  json::ParseOptions po;
  po.source = json_path.string();
  const json::Value doc = json::parse(read_text_file(json_path.string()), po);
  const json::Value* rule = doc.is_object() ? doc.find("mask_rule") : nullptr;
  if (!rule) return std::nullopt;
  const std::string& name = rule->as_string(json_path.string() + ": mask_rule");
  // generate cases describe the rule of their first encoder call first.
  std::optional<ImageMask> mask = image_mask_of_case_rule(name.substr(0, name.find(' ')));
  if (!mask) throw Error(json_path.string() + ": unknown mask_rule \"" + name + "\"");
  return mask;
}

// mm_token_type_ids, when given, must mark exactly the placeholder ids.
void check_token_types(const TensorStore& in, const std::string& file, const std::vector<int32_t>& ids,
                       int64_t image_token_id) {
  const TensorView* v = in.find("mm_token_type_ids");
  if (!v) return;
  Tensor t = tensor_from_view(*v);
  if (size_t(t.numel()) != ids.size())
    throw Error(file + ": \"mm_token_type_ids\" has " + std::to_string(t.numel()) + " entries for " +
                std::to_string(ids.size()) + " input ids");
  for (size_t k = 0; k < ids.size(); ++k)
    if ((t.i[k] == 1) != (ids[k] == image_token_id))
      throw Error(file + ": \"mm_token_type_ids\"[" + std::to_string(k) + "] = " + std::to_string(t.i[k]) +
                  " but input id " + std::to_string(ids[k]) + (ids[k] == image_token_id ? " is" : " is not") +
                  " the image placeholder " + std::to_string(image_token_id));
}

// The case's own soft tokens [n_total, H], split by the runs of placeholder ids.
std::vector<Tensor> case_soft_tokens(const TensorStore& in, const std::string& file, const std::vector<int32_t>& ids,
                                     int64_t image_token_id) {
  const TensorView* v = in.find("vision.soft_tokens");
  if (!v) throw Error(file + ": tensor \"vision.soft_tokens\" is missing");
  Tensor all = tensor_from_view(*v);
  if (all.dtype != DType::kF32 || all.shape.size() != 2)
    throw Error(file + ": \"vision.soft_tokens\" must be float [n, H], got " + all.shape_string());
  const int64_t H = all.dim(1);
  std::vector<Tensor> out;
  int64_t row = 0;
  for (const ImageRun& r : image_runs(ids, image_token_id)) {
    if (row + r.count > all.dim(0))
      throw Error(file + ": \"vision.soft_tokens\" has " + std::to_string(all.dim(0)) +
                  " rows, fewer than the prompt's placeholder ids");
    Tensor t = Tensor::f32({r.count, H});
    std::copy(all.f.begin() + row * H, all.f.begin() + (row + r.count) * H, t.f.begin());
    out.push_back(std::move(t));
    row += r.count;
  }
  if (row != all.dim(0))
    throw Error(file + ": \"vision.soft_tokens\" has " + std::to_string(all.dim(0)) + " rows, the prompt " +
                std::to_string(row) + " placeholder ids");
  return out;
}

}  // namespace

std::optional<ImageMask> image_mask_of_case_rule(const std::string& rule) {
  if (rule.empty()) return std::nullopt;
  if (rule == "hf_generate" || rule == "hf") return ImageMask::kHf;
  if (rule == "google_jax" || rule == "jax") return ImageMask::kJax;
  if (rule == "hf_forward_causal" || rule == "causal") return ImageMask::kCausal;
  return std::nullopt;
}

NamedTensors run_parity_inputs(DiffusionGemma& model, const std::vector<std::string>& files,
                               const ParityOptions& options) {
  NamedTensors out;
  TapRecorder rec(options.expert_inputs);
  model.set_observer(&rec);
  struct Reset {
    DiffusionGemma& m;
    ImageMask mask;
    ~Reset() {
      m.set_observer(nullptr);
      m.set_image_mask(mask);
    }
  } reset{model, model.options().image_mask};
  bool any = false;
  for (const auto& file : files) {
    TensorStore in = TensorStore::open_file(file);
    if (in.find("input_ids")) {
      any = true;
      std::vector<int32_t> ids = ids_of(in, "input_ids", file);
      model.truncate_cache(0);  // fresh cache
      check_positions(in, "position_ids", file, 0, ids.size());
      rec.clear();
      if (in.find("pixel_values") || in.find("vision.soft_tokens")) {
        const int64_t image_id = model.config().image_token_id;
        check_token_types(in, file, ids, image_id);
        std::optional<ImageMask> mask = options.image_mask ? options.image_mask : case_mask_rule(file);
        model.set_image_mask(mask ? *mask : reset.mask);
        if (options.case_soft_tokens) {
          const std::vector<Tensor> soft = case_soft_tokens(in, file, ids, image_id);
          model.encode_soft_tokens(ids, soft);
        } else {
          const std::vector<VisionInput> images =
              vision_inputs_from_case(in, file, model.config().vision.pooling_kernel_size);
          model.encode_with_images(ids, images);
        }
        model.set_image_mask(reset.mask);
      } else {
        model.encode(ids);
      }
      take_taps(rec, out);
      take_cache(model.cache(), out);
    }
    if (in.find("decoder_input_ids")) {
      any = true;
      std::vector<int32_t> canvas = ids_of(in, "decoder_input_ids", file);
      check_positions(in, "decoder_position_ids", file, model.cache_length(), canvas.size());
      const int64_t n = int64_t(canvas.size()), V = model.vocab_size();
      std::vector<float> sc;
      if (const TensorView* s = in.find("self_conditioning_logits")) {
        Tensor t = tensor_from_view(*s);
        if (t.dtype != DType::kF32 || t.numel() != n * V)
          throw Error(file + ": \"self_conditioning_logits\" must be float [1, " + std::to_string(n) + ", " +
                      std::to_string(V) + "], got " + t.shape_string());
        sc = std::move(t.f);
      }
      std::vector<float> logits(size_t(n * V));
      rec.clear();
      model.decode_n(canvas.data(), n, sc.empty() ? nullptr : sc.data(), logits.data());
      take_taps(rec, out);
    }
  }
  if (!any) throw Error("no input file holds input_ids or decoder_input_ids");
  return out;
}

void write_named_tensors(const std::string& path, const NamedTensors& tensors) {
  SafetensorsWriter w;
  for (const auto& [name, t] : tensors) {
    if (t.dtype == DType::kF32) {
      w.add_f32(name, t.shape, t.f.data());
    } else {
      std::vector<int64_t> wide(t.i.begin(), t.i.end());
      w.add(name, DType::kI64, t.shape, wide.data());
    }
  }
  w.set_metadata("format", "pt");
  w.set_metadata("producer", "dgemma forward");
  w.write(path);
}

}  // namespace dgemma

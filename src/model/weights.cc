#include "model/weights.h"

#include <cstring>
#include <map>
#include <set>

#include "dgemma/error.h"
#include "quantize/quantized_weight.h"
#include "quantize/resolve.h"
#include "quantize/scheme_traits.h"

namespace dgemma {
namespace {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

WeightRef ref_of(const TensorView& v, const std::string& name, std::deque<std::vector<uint8_t>>& owned,
                 WeightPrecision precision) {
  WeightRef r;
  r.name = name;
  r.dtype = v.dtype();
  r.shape = v.shape();
  r.data = v.data;
  const bool convert = precision == WeightPrecision::kBF16 && v.dtype() != DType::kBF16;
  if (convert) {
    std::vector<uint8_t> buf(size_t(v.numel()) * 2);
    uint16_t* p = reinterpret_cast<uint16_t*>(buf.data());
    for (int64_t k = 0; k < v.numel(); ++k) p[k] = f32_to_bf16(v.at_f32(size_t(k)));
    owned.push_back(std::move(buf));
    r.data = owned.back().data();
    r.dtype = DType::kBF16;
  } else if (!v.aligned()) {
    owned.emplace_back(v.data, v.data + v.nbytes());
    r.data = owned.back().data();
  }
  return r;
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& config, const TensorStore& store, const BindOptions& options) {
  ModelWeights mw;
  std::vector<std::string> missing, misshapen, conflicting, bad_dtype, unexpected;
  std::set<std::string> used;
  std::map<std::string, WeightRef> refs;
  // Quantized checkpoints (docs/formats.md §7): each expected tensor is first
  // offered to the quantized readers, which decide from the stored tensors.
  const std::optional<QuantContext> quant = detect_quantization(store);

  const std::vector<ExpectedTensor> expected = expected_tensors(config);
  int64_t total_elems = 0, bound_elems = 0;
  for (const ExpectedTensor& ex : expected) total_elems += numel_of(ex.shape);
  auto report = [&](const ExpectedTensor& ex) {
    bound_elems += numel_of(ex.shape);
    if (options.progress) options.progress(bound_elems, total_elems);
  };

  for (const ExpectedTensor& ex : expected) {
    BoundTensor b;
    b.expected = ex;
    if (std::optional<WeightRef> q = quant ? resolve_quantized(*quant, ex) : std::nullopt) {
      used.insert(q->quant->stored_names.begin(), q->quant->stored_names.end());
      b.present = q->quant->found_as;
      b.stored_as = b.present.front();
      b.dtype = q->dtype;
      b.nbytes = q->quant->stored_bytes;
      b.storage = std::string(quant_scheme_name(q->quant->scheme));
      // A scheme whose weights choose their code width (MLX affine) names it: "affine4".
      if (scheme_traits(q->quant->scheme).code_bits == 0) b.storage += std::to_string(q->quant->bits);
      refs[ex.name] = std::move(*q);
      mw.bound.push_back(std::move(b));
      report(ex);
      continue;
    }
    std::vector<std::string> names = {ex.name};
    names.insert(names.end(), ex.aliases.begin(), ex.aliases.end());
    const TensorView* source = nullptr;
    for (const auto& n : names) {
      const TensorView* v = store.find(n);
      if (!v) continue;
      used.insert(n);
      b.present.push_back(n);
      if (v->shape() != ex.shape) {
        misshapen.push_back(n + " has shape " + shape_string(v->shape()) + ", expected " + shape_string(ex.shape));
        continue;
      }
      if (v->dtype() != DType::kF32 && v->dtype() != DType::kBF16 && v->dtype() != DType::kF16) {
        bad_dtype.push_back(n + " has dtype " + std::string(dtype_name(v->dtype())) +
                            " (expected BF16, F16 or F32 for an unquantized checkpoint)");
        continue;
      }
      if (!source) {
        source = v;
        b.stored_as = n;
      } else if (options.verify_tied_copies && (v->dtype() != source->dtype() || v->nbytes() != source->nbytes() ||
                                                std::memcmp(v->data, source->data, v->nbytes()) != 0)) {
        conflicting.push_back(n + " differs from its tied tensor " + b.stored_as);
      }
    }
    if (b.present.empty()) {
      std::string m = ex.name + " " + shape_string(ex.shape);
      if (!ex.aliases.empty()) {
        m += " (or tied alias";
        for (const auto& a : ex.aliases) m += " " + a;
        m += ")";
      }
      missing.push_back(m);
    }
    if (source) {
      b.dtype = source->dtype();
      b.nbytes = source->nbytes();
      b.storage = std::string(dtype_name(b.dtype));
      refs[ex.name] = ref_of(*source, ex.name, mw.owned, options.precision);
      const bool mapped = refs[ex.name].data == source->data;
      if (auto q = quantize_at_load(refs[ex.name], ex, options.quantize, mapped, options.threads))
        refs[ex.name] = std::move(*q);
    }
    mw.bound.push_back(std::move(b));
    report(ex);
  }

  for (const auto& n : store.names()) {
    if (used.count(n) || (quant && is_ignored_quant_tensor(*quant, n))) continue;
    if (is_skipped_tensor(n)) {
      mw.skipped.push_back(n);
      mw.skipped_bytes += store.find(n)->nbytes();
    } else {
      unexpected.push_back(n);
    }
  }

  if (!missing.empty() || !misshapen.empty() || !conflicting.empty() || !bad_dtype.empty() || !unexpected.empty()) {
    std::string msg = store.dir() + ": checkpoint does not match " + config.source + ":";
    auto list = [&](const char* title, const std::vector<std::string>& items) {
      if (items.empty()) return;
      msg += "\n  " + std::to_string(items.size()) + " " + title + ":";
      size_t shown = 0;
      for (const auto& s : items) {
        if (++shown > 40) {
          msg += "\n    ... and " + std::to_string(items.size() - 40) + " more";
          break;
        }
        msg += "\n    " + s;
      }
    };
    list("missing tensor(s)", missing);
    list("tensor(s) with the wrong shape", misshapen);
    list("tensor(s) with an unsupported dtype", bad_dtype);
    list("tied copies that differ", conflicting);
    list("unexpected tensor(s)", unexpected);
    throw Error(msg);
  }

  auto take = [&](const std::string& name) { return refs.at(name); };
  const std::string d = kDecoderPrefix;
  mw.embed = take(d + "embed_tokens.weight");
  mw.final_norm = take(d + "norm.weight");
  mw.sc_pre_norm = take(d + "self_conditioning.pre_norm.weight");
  mw.sc_gate = take(d + "self_conditioning.gate_proj.weight");
  mw.sc_up = take(d + "self_conditioning.up_proj.weight");
  mw.sc_down = take(d + "self_conditioning.down_proj.weight");
  mw.layers.resize(size_t(config.num_layers));
  for (int i = 0; i < config.num_layers; ++i) {
    LayerWeights& L = mw.layers[size_t(i)];
    const std::string p = d + "layers." + std::to_string(i) + ".";
    L.input_layernorm = take(p + "input_layernorm.weight");
    L.q_proj = take(p + "self_attn.q_proj.weight");
    L.k_proj = take(p + "self_attn.k_proj.weight");
    if (config.layer(i).has_v_proj) L.v_proj = take(p + "self_attn.v_proj.weight");
    L.o_proj = take(p + "self_attn.o_proj.weight");
    L.q_norm = take(p + "self_attn.q_norm.weight");
    L.k_norm = take(p + "self_attn.k_norm.weight");
    L.post_attention_layernorm = take(p + "post_attention_layernorm.weight");
    L.pre_feedforward_layernorm = take(p + "pre_feedforward_layernorm.weight");
    L.mlp_gate = take(p + "mlp.gate_proj.weight");
    L.mlp_up = take(p + "mlp.up_proj.weight");
    L.mlp_down = take(p + "mlp.down_proj.weight");
    L.post_feedforward_layernorm_1 = take(p + "post_feedforward_layernorm_1.weight");
    L.router_proj = take(p + "router.proj.weight");
    L.router_scale = take(p + "router.scale");
    L.router_per_expert_scale = take(p + "router.per_expert_scale");
    L.pre_feedforward_layernorm_2 = take(p + "pre_feedforward_layernorm_2.weight");
    L.experts_gate_up = take(p + "experts.gate_up_proj");
    L.experts_down = take(p + "experts.down_proj");
    L.post_feedforward_layernorm_2 = take(p + "post_feedforward_layernorm_2.weight");
    L.post_feedforward_layernorm = take(p + "post_feedforward_layernorm.weight");
    L.decoder_layer_scalar = take(p + "layer_scalar");
    L.encoder_layer_scalar = take(kEncoderTextPrefix + "layers." + std::to_string(i) + ".layer_scalar");
  }
  return mw;
}

}  // namespace dgemma

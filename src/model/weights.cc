#include "model/weights.h"

#include <cstring>
#include <map>
#include <optional>
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

// What does not match between the checkpoint and the config, collected over
// every tensor and reported in one error.
struct Mismatches {
  std::vector<std::string> missing, misshapen, conflicting, bad_dtype, unexpected;

  bool empty() const {
    return missing.empty() && misshapen.empty() && conflicting.empty() && bad_dtype.empty() && unexpected.empty();
  }
  // Each kind under its own heading, at most 40 lines of it.
  std::string message(const std::string& head) const {
    std::string msg = head;
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
    return msg;
  }
};

// What binding has gathered so far: the stored tensors used, the bound
// weight of each expected tensor by name, and the mismatches.
struct Binding {
  std::set<std::string> used;
  std::map<std::string, WeightRef> refs;
  Mismatches bad;
};

// Offers `ex` to the quantized readers (docs/formats.md §7); on a match
// fills b and the binding's weight, and marks the stored tensors used.
bool bind_quantized(const QuantContext& quant, const ExpectedTensor& ex, BoundTensor& b, Binding& bn) {
  std::optional<WeightRef> q = resolve_quantized(quant, ex);
  if (!q) return false;
  bn.used.insert(q->quant->stored_names.begin(), q->quant->stored_names.end());
  b.present = q->quant->found_as;
  b.stored_as = b.present.front();
  b.dtype = q->dtype;
  b.nbytes = q->quant->stored_bytes;
  b.storage = std::string(quant_scheme_name(q->quant->scheme));
  // A scheme whose weights choose their code width (MLX affine) names it: "affine4".
  // A GGUF block tensor names its ggml type: "q4_K" (docs/formats.md §5.2).
  if (q->quant->scheme == QuantScheme::kGgml)
    b.storage = std::string(ggml_type_name(q->quant->ggml_type));
  else if (scheme_traits(q->quant->scheme).code_bits == 0)
    b.storage += std::to_string(q->quant->bits);
  bn.refs[ex.name] = std::move(*q);
  return true;
}

// The stored copy of `ex` to read among its name and tied aliases: the first
// with the right shape and a float dtype. Records every stored name in b and
// as used, and the copies that are misshapen, of another dtype or (when
// verified) differ from the chosen one.
const TensorView* find_plain_source(const TensorStore& store, const ExpectedTensor& ex, bool verify_tied_copies,
                                    BoundTensor& b, Binding& bn) {
  std::vector<std::string> names = {ex.name};
  names.insert(names.end(), ex.aliases.begin(), ex.aliases.end());
  const TensorView* source = nullptr;
  for (const auto& n : names) {
    const TensorView* v = store.find(n);
    if (!v) continue;
    bn.used.insert(n);
    b.present.push_back(n);
    if (v->shape() != ex.shape) {
      bn.bad.misshapen.push_back(n + " has shape " + shape_string(v->shape()) + ", expected " + shape_string(ex.shape));
      continue;
    }
    if (v->dtype() != DType::kF32 && v->dtype() != DType::kBF16 && v->dtype() != DType::kF16) {
      bn.bad.bad_dtype.push_back(n + " has dtype " + std::string(dtype_name(v->dtype())) +
                                 " (expected BF16, F16 or F32 for an unquantized checkpoint)");
      continue;
    }
    if (!source) {
      source = v;
      b.stored_as = n;
    } else if (verify_tied_copies && (v->dtype() != source->dtype() || v->nbytes() != source->nbytes() ||
                                      std::memcmp(v->data, source->data, v->nbytes()) != 0)) {
      bn.bad.conflicting.push_back(n + " differs from its tied tensor " + b.stored_as);
    }
  }
  return source;
}

// The name of a missing tensor with its shape and tied aliases.
std::string missing_entry(const ExpectedTensor& ex) {
  std::string m = ex.name + " " + shape_string(ex.shape);
  if (!ex.aliases.empty()) {
    m += " (or tied alias";
    for (const auto& a : ex.aliases) m += " " + a;
    m += ")";
  }
  return m;
}

// Binds an unquantized tensor: its stored copy, converted, realigned or
// quantized at load as the options say.
void bind_plain(const TensorStore& store, const ExpectedTensor& ex, const BindOptions& options, BoundTensor& b,
                Binding& bn, std::deque<std::vector<uint8_t>>& owned) {
  const TensorView* source = find_plain_source(store, ex, options.verify_tied_copies, b, bn);
  if (b.present.empty()) bn.bad.missing.push_back(missing_entry(ex));
  if (!source) return;
  b.dtype = source->dtype();
  b.nbytes = source->nbytes();
  b.storage = std::string(dtype_name(b.dtype));
  WeightRef& ref = bn.refs[ex.name];
  ref = ref_of(*source, ex.name, owned, options.precision);
  const bool mapped = ref.data == source->data;
  if (auto q = quantize_at_load(ref, ex, options.quantize, mapped, options.threads)) ref = std::move(*q);
}

// Stored tensors no expected tensor used: skipped (audio, vision without a
// tower) or unexpected.
void sort_unused(const ModelConfig& config, const TensorStore& store, const std::optional<QuantContext>& quant,
                 Binding& bn, ModelWeights& mw) {
  for (const auto& n : store.names()) {
    if (bn.used.count(n) || (quant && is_ignored_quant_tensor(*quant, n))) continue;
    if (is_skipped_tensor(config, n)) {
      mw.skipped.push_back(n);
      mw.skipped_bytes += store.find(n)->nbytes();
    } else {
      bn.bad.unexpected.push_back(n);
    }
  }
}

// Layer i's slots: attention, the dense MLP, the router and experts, their
// norms and the layer scalars of both stacks.
void take_layer(const ModelConfig& config, int i, const std::map<std::string, WeightRef>& refs, LayerWeights& L) {
  auto take = [&](const std::string& name) { return refs.at(name); };
  const std::string p = kDecoderPrefix + "layers." + std::to_string(i) + ".";
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

// The model's slots from the bound tensors: embeddings, final norm, the
// self-conditioning MLP and every layer.
void take_slots(const ModelConfig& config, const std::map<std::string, WeightRef>& refs, ModelWeights& mw) {
  auto take = [&](const std::string& name) { return refs.at(name); };
  const std::string d = kDecoderPrefix;
  mw.embed = take(d + "embed_tokens.weight");
  mw.final_norm = take(d + "norm.weight");
  mw.sc_pre_norm = take(d + "self_conditioning.pre_norm.weight");
  mw.sc_gate = take(d + "self_conditioning.gate_proj.weight");
  mw.sc_up = take(d + "self_conditioning.up_proj.weight");
  mw.sc_down = take(d + "self_conditioning.down_proj.weight");
  mw.layers.resize(size_t(config.num_layers));
  for (int i = 0; i < config.num_layers; ++i) take_layer(config, i, refs, mw.layers[size_t(i)]);
  take_vision_slots(config, refs, mw.vision);
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& config, const TensorStore& store, const BindOptions& options) {
  ModelWeights mw;
  Binding bn;
  // Quantized checkpoints (docs/formats.md §7): each expected tensor is first
  // offered to the quantized readers, which decide from the stored tensors.
  const std::optional<QuantContext> quant = detect_quantization(store);

  std::vector<ExpectedTensor> expected = expected_tensors(config);
  for (ExpectedTensor& v : expected_vision_tensors(config)) expected.push_back(std::move(v));
  int64_t total_elems = 0, bound_elems = 0;
  for (const ExpectedTensor& ex : expected) total_elems += numel_of(ex.shape);
  for (const ExpectedTensor& ex : expected) {
    BoundTensor b;
    b.expected = ex;
    if (!(quant && bind_quantized(*quant, ex, b, bn))) bind_plain(store, ex, options, b, bn, mw.owned);
    mw.bound.push_back(std::move(b));
    bound_elems += numel_of(ex.shape);
    if (options.progress) options.progress(bound_elems, total_elems);
  }
  sort_unused(config, store, quant, bn, mw);
  if (!bn.bad.empty()) throw Error(bn.bad.message(store.dir() + ": checkpoint does not match " + config.source + ":"));
  take_slots(config, bn.refs, mw);
  return mw;
}

}  // namespace dgemma

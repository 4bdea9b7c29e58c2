#include "model/layerwise_runner.h"

#include <cstring>

#include "dgemma/error.h"
#include "model/op_site.h"
#include "quantize/page_release.h"

namespace dgemma {
namespace {

bool inside(const void* p, const std::vector<uint8_t>& buf) {
  const auto* b = static_cast<const uint8_t*>(p);
  return !buf.empty() && b >= buf.data() && b < buf.data() + buf.size();
}

}  // namespace

LayerwiseRunner::LayerwiseRunner(DiffusionGemma& model) : model_(model) {}

Tensor LayerwiseRunner::encoder_input(const std::vector<int32_t>& ids) {
  if (ids.empty()) throw Error("layerwise run: an empty prompt");
  return model_.encoder_embedding(ids);
}

Tensor LayerwiseRunner::decoder_input(const std::vector<int32_t>& canvas) {
  if (canvas.empty()) throw Error("layerwise run: an empty canvas");
  return model_.decoder_input(model_.canvas_ids(canvas.data(), int64_t(canvas.size())), nullptr, 0);
}

void LayerwiseRunner::encoder_layer(int layer, Tensor& x) {
  if (layer < 0 || layer >= model_.config_.num_layers) throw Error("layerwise run: no layer " + std::to_string(layer));
  KvCache& cache = model_.cache_;
  const LayerCache& lc = cache.layers[size_t(layer)];
  cache.layers[size_t(layer)].reset(lc.kv_heads, lc.head_dim, lc.retain);
  cache.length = 0;
  const int64_t n = x.dim(0);
  model_.run_layer(layer, Pass::kEncoder, x, positions_tensor(0, n));
  cache.length = n;
}

void LayerwiseRunner::decoder_layer(int layer, Tensor& x) {
  if (layer < 0 || layer >= model_.config_.num_layers) throw Error("layerwise run: no layer " + std::to_string(layer));
  model_.run_layer(layer, Pass::kDecoder, x, positions_tensor(model_.cache_.length, x.dim(0)));
}

void LayerwiseRunner::release_layer(int layer) {
  const LayerWeights& W = model_.weights_.layers.at(size_t(layer));
  model_.exec_.backend().release_weight_copies();
  for (const WeightRef* w : {&W.input_layernorm,
                             &W.q_proj,
                             &W.k_proj,
                             &W.v_proj,
                             &W.o_proj,
                             &W.q_norm,
                             &W.k_norm,
                             &W.post_attention_layernorm,
                             &W.pre_feedforward_layernorm,
                             &W.mlp_gate,
                             &W.mlp_up,
                             &W.mlp_down,
                             &W.post_feedforward_layernorm_1,
                             &W.router_proj,
                             &W.router_scale,
                             &W.router_per_expert_scale,
                             &W.pre_feedforward_layernorm_2,
                             &W.experts_gate_up,
                             &W.experts_down,
                             &W.post_feedforward_layernorm_2,
                             &W.post_feedforward_layernorm}) {
    if (w->empty() || w->quant) continue;
    bool owned = false;
    for (const std::vector<uint8_t>& buf : model_.weights_.owned) owned = owned || inside(w->data, buf);
    if (!owned) release_mapped_pages(w->data, uint64_t(w->numel()) * uint64_t(dtype_bits(w->dtype) / 8));
  }
}

}  // namespace dgemma

#include "checkpoint/vision_shapes.h"

#include "checkpoint/tensor_names.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

// The shape of a plain float tensor `name`, or null (absent or quantized).
const std::vector<int64_t>* plain_shape(const TensorStore& store, const std::string& name) {
  const TensorView* v = store.find(name);
  if (!v) return nullptr;
  const DType t = v->dtype();
  if (t != DType::kF32 && t != DType::kBF16 && t != DType::kF16) return nullptr;
  return &v->shape();
}

}  // namespace

void resolve_vision_config(ModelConfig& c, const TensorStore& store) {
  if (!c.has_vision_config) return;
  bool stored = false;
  for (const std::string& n : store.names())
    if (n.rfind(kVisionTowerPrefix, 0) == 0 || n.rfind(kEmbedVisionPrefix + "embedding_projection.", 0) == 0) {
      stored = true;
      break;
    }
  c.vision_tower = stored;
  if (!stored) return;
  VisionConfig& v = c.vision;
  const std::string layer0 = kVisionTowerPrefix + "encoder.layers.0.";
  if (v.intermediate_size <= 0)
    if (const auto* s = plain_shape(store, layer0 + "mlp.gate_proj.linear.weight"); s && s->size() == 2)
      v.intermediate_size = int((*s)[0]);
  if (v.num_kv_heads <= 0)
    if (const auto* s = plain_shape(store, layer0 + "self_attn.k_proj.linear.weight");
        s && s->size() == 2 && (*s)[0] % v.head_dim == 0 && (*s)[0] > 0) {
      v.num_kv_heads = int((*s)[0] / v.head_dim);
      if (v.num_heads % v.num_kv_heads != 0)
        throw Error(store.dir() + ": the stored k_proj gives " + std::to_string(v.num_kv_heads) +
                    " vision key/value heads, which do not divide vision_config.num_attention_heads " +
                    std::to_string(v.num_heads));
    }
  if (v.position_embedding_size <= 0)
    if (const auto* s = plain_shape(store, kVisionTowerPrefix + "patch_embedder.position_embedding_table");
        s && s->size() == 3)
      v.position_embedding_size = (*s)[1];
  if (!v.standardize.has_value()) v.standardize = store.find(kVisionTowerPrefix + "std_bias") != nullptr;
  if (!v.complete())
    throw Error(c.source + ": vision_config leaves out " + v.missing_keys() + " and the checkpoint in " + store.dir() +
                " does not give them (stored quantized or missing); add them to the config (docs/model.md §7.1)");
}

void fill_published_tower_sizes(VisionConfig& v) {
  if (v.intermediate_size <= 0) v.intermediate_size = 4304;
  if (v.num_kv_heads <= 0) v.num_kv_heads = v.num_heads;
  if (v.position_embedding_size <= 0) v.position_embedding_size = 10240;
  if (!v.standardize) v.standardize = true;
}

}  // namespace dgemma

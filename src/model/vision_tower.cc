#include "model/vision_tower.h"

#include <cmath>
#include <string>

#include "dgemma/error.h"
#include "model/op_site.h"

namespace dgemma {
namespace {

WeightRef constant_ref(const char* name, const std::vector<float>& values) {
  WeightRef r;
  r.name = name;
  r.dtype = DType::kF32;
  r.shape = {int64_t(values.size())};
  r.data = values.data();
  return r;
}

// Column (c = 0) or row (c = 1) of every patch, as embedding ids.
Tensor position_column(const Tensor& positions, int c) {
  const int64_t n = positions.dim(0);
  Tensor t = Tensor::i32({n});
  for (int64_t r = 0; r < n; ++r) t.i[size_t(r)] = positions.i[size_t(2 * r + c)];
  return t;
}

}  // namespace

VisionTower::VisionTower(const ModelConfig& config, const VisionWeights& weights, bool bf16_run)
    : config_(config), w_(weights), bf16_run_(bf16_run) {
  if (w_.empty()) throw Error(config.source + ": the model has no vision tower");
  const VisionConfig& v = config_.vision;
  const size_t patch = size_t(3 * v.patch_size * v.patch_size);
  half_.assign(patch, 0.5f);
  two_.assign(patch, 2.0f);
  // The pooler's scale: √Hv as a float32 product (docs/model.md §7.4).
  root_hidden_.assign(1, float(std::sqrt(double(v.hidden_size))));
  pixel_shift_ = constant_ref("vision.pixel_shift", half_);
  pixel_scale_ = constant_ref("vision.pixel_scale", two_);
  root_hidden_ref_ = constant_ref("vision.root_hidden_size", root_hidden_);
}

void VisionTower::check_input(const VisionInput& im) const {
  const VisionConfig& v = config_.vision;
  const int64_t k = v.pooling_kernel_size, patch = 3 * int64_t(v.patch_size) * v.patch_size;
  const Tensor &px = im.pixel_values, &pos = im.positions;
  auto fail = [](const std::string& what) { throw Error("vision input: " + what + " (docs/model.md §7.2)"); };
  if (px.dtype != DType::kF32 || px.shape.size() != 2 || px.dim(1) != patch)
    fail("pixel_values must be F32 [n, " + std::to_string(patch) + "] (3·patch_size² with patch_size " +
         std::to_string(v.patch_size) + "), got " + px.shape_string());
  const int64_t n = px.dim(0);
  if (pos.dtype != DType::kI32 || pos.shape != std::vector<int64_t>{n, 2})
    fail("positions must be I32 [" + std::to_string(n) + ", 2], got " + pos.shape_string());
  if (im.grid_h <= 0 || im.grid_w <= 0 || im.grid_h * im.grid_w != n)
    fail("grid " + std::to_string(im.grid_h) + "x" + std::to_string(im.grid_w) + " does not hold the " +
         std::to_string(n) + " patches");
  if (im.grid_h % k || im.grid_w % k)
    fail("grid " + std::to_string(im.grid_h) + "x" + std::to_string(im.grid_w) +
         " is not a multiple of the pooling kernel " + std::to_string(k));
  if (im.n_soft != (im.grid_h / k) * (im.grid_w / k))
    fail("n_soft " + std::to_string(im.n_soft) +
         " is not (grid_h/k)·(grid_w/k) = " + std::to_string((im.grid_h / k) * (im.grid_w / k)));
  pos.ensure_host();
  for (int64_t r = 0; r < n; ++r) {
    const int32_t x = pos.i[size_t(2 * r)], y = pos.i[size_t(2 * r + 1)];
    if (x < 0 || y < 0 || x >= im.grid_w || y >= im.grid_h)
      fail("patch " + std::to_string(r) + " has position (" + std::to_string(x) + ", " + std::to_string(y) +
           ") outside the " + std::to_string(im.grid_w) + "x" + std::to_string(im.grid_h) + " grid");
    if (x >= v.position_embedding_size || y >= v.position_embedding_size)
      fail("patch " + std::to_string(r) + " has position (" + std::to_string(x) + ", " + std::to_string(y) +
           ") beyond the " + std::to_string(v.position_embedding_size) + " rows of the position table");
  }
}

// h0 = input_proj(2·(p − 0.5)) + (T_x[column] + T_y[row]) (docs/model.md §7.2).
Tensor& VisionTower::patch_embeddings(Executor& ex, const VisionInput& im) {
  OpSite op{ex, -1, Pass::kVision, 0, ws_};
  Tensor& scaled =
      op.run(OpKind::kAffine, "patch_embedder.input_scale", {&im.pixel_values}, {&pixel_shift_, &pixel_scale_});
  Tensor& proj = op.linear("patch_embedder.input_proj", scaled, w_.input_proj);
  const Tensor cols = position_column(im.positions, 0), rows = position_column(im.positions, 1);
  OpAttrs ea;
  ea.scale = 1.0f;
  ea.round_to_bf16 = bf16_run_;
  Tensor& tx = op.run(OpKind::kEmbedding, "patch_embedder.position_x", {&cols}, {&w_.position_x}, ea);
  Tensor& ty = op.run(OpKind::kEmbedding, "patch_embedder.position_y", {&rows}, {&w_.position_y}, ea);
  Tensor& table = op.add("patch_embedder.positions", tx, ty);
  return op.add("patch_embedder.sum", proj, table);
}

// One encoder layer (docs/model.md §7.4): pre-norm attention with q/k norms,
// 2-D RoPE and a no-scale v norm, bidirectional over the image's patches;
// then the gated MLP; each branch post-normed into the residual.
void VisionTower::run_layer(Executor& ex, int li, Tensor& x, const Tensor& positions) {
  const VisionConfig& v = config_.vision;
  const VisionLayerWeights& W = w_.layers[size_t(li)];
  OpSite op{ex, li, Pass::kVision, 0, ws_};
  const float eps = float(v.rms_norm_eps);
  const int64_t n = x.dim(0), d = v.head_dim, Hq = v.num_heads, Hk = v.num_kv_heads;

  Tensor& a = op.norm("input_layernorm", x, &W.input_layernorm, eps);
  Tensor& q = op.linear("self_attn.q_proj", a, W.q_proj);
  q.reshape({n, Hq, d});
  Tensor& k = op.linear("self_attn.k_proj", a, W.k_proj);
  k.reshape({n, Hk, d});
  Tensor& vv = op.linear("self_attn.v_proj", a, W.v_proj);
  vv.reshape({n, Hk, d});
  OpAttrs ra;
  ra.rope_pairs = int(d / 4);  // each half of the head rotates all its pairs (docs/model.md §7.3)
  ra.rope_theta = v.rope_theta;
  Tensor& qn = op.norm("self_attn.q_norm", q, &W.q_norm, eps);
  Tensor& qr = op.run(OpKind::kRope, "self_attn.q_rope", {&qn, &positions}, {}, ra);
  Tensor& kn = op.norm("self_attn.k_norm", k, &W.k_norm, eps);
  Tensor& kr = op.run(OpKind::kRope, "self_attn.k_rope", {&kn, &positions}, {}, ra);
  Tensor& vn = op.norm("self_attn.v_norm", vv, nullptr, eps);
  // Every patch sees every patch of its image: no mask, no window, scale 1.
  const Tensor order = positions_tensor(0, n);
  OpAttrs aa;
  aa.mask = AttentionMask::kNone;
  Tensor& attn = op.run(OpKind::kAttention, "self_attn.attention", {&qr, &kr, &vn, &order, &order}, {}, aa);
  Tensor& o = op.linear("self_attn.o_proj", attn, W.o_proj);
  Tensor& on = op.norm("post_attention_layernorm", o, &W.post_attention_layernorm, eps);
  Tensor& x1 = op.add("attention_residual", x, on);

  Tensor& m = op.norm("pre_feedforward_layernorm", x1, &W.pre_feedforward_layernorm, eps);
  Tensor& gate = op.linear("mlp.gate_proj", m, W.mlp_gate);
  Tensor& up = op.linear("mlp.up_proj", m, W.mlp_up);
  Tensor& act = op.run(OpKind::kGeluGlu, "mlp.act", {&gate, &up}, {});
  Tensor& down = op.linear("mlp.down_proj", act, W.mlp_down);
  Tensor& mn = op.norm("post_feedforward_layernorm", down, &W.post_feedforward_layernorm, eps);
  // Swapped, not copied: the slot takes the old residual's storage.
  std::swap(x, op.add("ffn_residual", x1, mn));
}

const Tensor& VisionTower::soft_tokens(Executor& ex, const VisionInput& im) {
  check_input(im);
  const VisionConfig& v = config_.vision;
  OpSite op{ex, -1, Pass::kVision, 0, ws_};
  std::swap(x_, patch_embeddings(ex, im));
  ex.tap("vision.patch_embeddings", x_);
  for (int li = 0; li < v.num_layers; ++li) {
    run_layer(ex, li, x_, im.positions);
    ex.tap("vision.layer_out." + std::to_string(li), x_);
  }
  // k×k average per cell, cells in raster order over the pooled grid
  // (docs/model.md §7.4), then ×√Hv.
  const int64_t k = v.pooling_kernel_size, n = x_.dim(0), cells_across = im.grid_w / k;
  Tensor cells = Tensor::i32({n});
  for (int64_t r = 0; r < n; ++r) {
    const int32_t x = im.positions.i[size_t(2 * r)], y = im.positions.i[size_t(2 * r + 1)];
    cells.i[size_t(r)] = int32_t(x / k + cells_across * (y / k));
  }
  OpAttrs pa;
  pa.out_rows = im.n_soft;
  pa.scale = float(1.0 / double(k * k));
  Tensor& sum = op.run(OpKind::kPoolCells, "pooler.cells", {&x_, &cells}, {}, pa);
  Tensor& pooled = op.run(OpKind::kScale, "pooler.root_hidden_size", {&sum}, {&root_hidden_ref_});
  ex.tap("vision.pooled", pooled);
  const Tensor* out = &pooled;
  if (!w_.std_bias.empty()) {
    out = &op.run(OpKind::kAffine, "standardize", {&pooled}, {&w_.std_bias, &w_.std_scale});
    ex.tap("vision.standardized", *out);
  }
  // embed_vision (docs/model.md §7.5): a no-scale norm, then the projection
  // into the text width. No √H_text: the rows enter the prompt as they are.
  Tensor& normed = op.norm("embed_vision.norm", *out, nullptr, float(v.rms_norm_eps));
  Tensor& soft = op.linear("embed_vision.projection", normed, w_.embed_projection);
  ex.tap("vision.soft_tokens", soft);
  return soft;
}

}  // namespace dgemma

#include "model/diffusion_gemma.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <tuple>
#include <utility>

#include "checkpoint/checkpoint_source.h"
#include "dgemma/error.h"
#include "model/op_site.h"

namespace dgemma {

DecoderWindow parse_decoder_window(const std::string& name) {
  if (name == "reference" || name == "hf") return DecoderWindow::kReference;
  if (name == "static") return DecoderWindow::kStatic;
  if (name == "per-query" || name == "jax") return DecoderWindow::kPerQuery;
  throw Error("unknown decoder window variant '" + name + "' (expected reference, static or per-query)");
}

std::unique_ptr<DiffusionGemma> DiffusionGemma::load(const std::string& dir, std::unique_ptr<Backend> backend,
                                                     const ModelOptions& options) {
  return load(dir, std::string(), std::move(backend), options);
}

std::unique_ptr<DiffusionGemma> DiffusionGemma::load(const std::string& dir, const std::string& config_path,
                                                     std::unique_ptr<Backend> backend, const ModelOptions& options) {
  if (!backend) throw Error(dir + ": no backend given to run the model on");
  CheckpointSource src = open_checkpoint(dir, config_path);
  return std::unique_ptr<DiffusionGemma>(
      new DiffusionGemma(std::move(src.config), std::move(src.store), std::move(backend), options));
}

DiffusionGemma::DiffusionGemma(ModelConfig config, TensorStore store, std::unique_ptr<Backend> backend,
                               const ModelOptions& options)
    : config_(std::move(config)),
      store_(std::move(store)),
      options_(options),
      own_backend_(std::move(backend)),
      exec_(*own_backend_) {
  // config_ moved: the LayerSpec rope pointers must point into our copy.
  for (auto& L : config_.layers) L.rope = L.type == LayerType::kFull ? &config_.rope_full : &config_.rope_sliding;
  BindOptions bo;
  bo.precision = options.precision;
  bo.verify_tied_copies = options.verify_tied_copies;
  bo.quantize = options.quantize;
  bo.threads = options.load_threads;
  bo.progress = options.load_progress;
  weights_ = bind_weights(config_, store_, bo);
  cache_ = empty_cache();
  if (!weights_.vision.empty()) vision_ = std::make_unique<VisionTower>(config_, weights_.vision, bf16_run());
}

const Tensor& DiffusionGemma::image_soft_tokens(const VisionInput& image) {
  if (!vision_)
    throw Error(config_.source + (config_.has_vision_config
                                      ? ": the checkpoint stores no vision tower tensors, so it cannot take images"
                                      : ": the model has no vision_config, so it cannot take images"));
  return vision_->soft_tokens(exec_, image);
}

KvCache DiffusionGemma::empty_cache() const {
  KvCache cache;
  cache.layers.resize(size_t(config_.num_layers));
  for (int i = 0; i < config_.num_layers; ++i) {
    const LayerSpec& L = config_.layer(i);
    int64_t retain = 0;
    if (L.type == LayerType::kSliding)
      retain = options_.decoder_window == DecoderWindow::kStatic ? config_.sliding_window
                                                                 : std::max(1, config_.sliding_window - 1);
    cache.layers[size_t(i)].reset(L.num_kv_heads, L.head_dim, retain);
  }
  return cache;
}

void DiffusionGemma::check_cache_layout(const KvCache& other, const std::string& who) const {
  if (other.layers.size() != cache_.layers.size())
    throw Error(who + ": the cache has " + std::to_string(other.layers.size()) + " layers, the model " +
                std::to_string(cache_.layers.size()));
  for (size_t i = 0; i < cache_.layers.size(); ++i) {
    const LayerCache& a = cache_.layers[i];
    const LayerCache& b = other.layers[i];
    if (a.kv_heads != b.kv_heads || a.head_dim != b.head_dim || a.retain != b.retain)
      throw Error(who + ": layer " + std::to_string(i) + " has kv_heads " + std::to_string(b.kv_heads) + ", head_dim " +
                  std::to_string(b.head_dim) + ", retain " + std::to_string(b.retain) + "; the model expects " +
                  std::to_string(a.kv_heads) + ", " + std::to_string(a.head_dim) + ", " + std::to_string(a.retain));
  }
}

void DiffusionGemma::swap_cache(KvCache& other) {
  check_cache_layout(other, "swap_cache");
  std::swap(cache_, other);
  decoder_step_ = 0;  // counts decode calls since the last encode of the cache now in place
  processed_valid_ = false;
}

// √H cast to the dtype the reference computes in, as it casts its scale
// buffer to the embedding dtype (docs/model.md §1.3): 53.0 in a bf16 run at H=2816;
// float32 in the fp32 mode, which is Transformers with dtype=float32 — also
// on a bf16 checkpoint, whose weights it upcasts exactly.
float DiffusionGemma::embed_scale() const {
  const float s = float(std::sqrt(double(config_.hidden_size)));
  return bf16_run() ? round_bf16(s) : s;
}

// The embedding attributes of both passes: scale, and for the decoder's
// self-conditioning the bf16 casts of a bf16 run (docs/model.md §3.3).
OpAttrs DiffusionGemma::embedding_attrs() const {
  OpAttrs a;
  a.scale = embed_scale();
  a.round_to_bf16 = bf16_run();
  return a;
}

// One transformer layer (docs/model.md §2.1).
void DiffusionGemma::run_layer(int li, Pass pass, Tensor& x, const Tensor& pos) {
  const LayerSpec& spec = config_.layer(li);
  const LayerWeights& W = weights_.layers[size_t(li)];
  LayerCache& lc = cache_.layers[size_t(li)];
  Backend* stage = size_t(li) < layer_backends_.size() ? layer_backends_[size_t(li)] : nullptr;
  Executor layer_exec(stage ? *stage : exec_.backend(), exec_.observer());
  OpSite op{layer_exec, li, pass, pass == Pass::kDecoder ? decoder_step_ : 0, workspace_};
  const float eps = float(config_.rms_norm_eps);
  const int64_t M = x.dim(0), d = spec.head_dim, Hq = config_.num_heads, Hk = spec.num_kv_heads;

  Tensor& a = op.norm("input_layernorm", x, &W.input_layernorm, eps);
  Tensor& q = op.linear("self_attn.q_proj", a, W.q_proj);
  q.reshape({M, Hq, d});
  Tensor& kraw = op.linear("self_attn.k_proj", a, W.k_proj);
  kraw.reshape({M, Hk, d});
  Tensor* vraw = nullptr;
  if (spec.has_v_proj) {
    vraw = &op.linear("self_attn.v_proj", a, W.v_proj);
    vraw->reshape({M, Hk, d});
  }
  OpAttrs ra;
  ra.rope_pairs = spec.rope->rotated_pairs(int(d));
  ra.rope_theta = spec.rope->theta;
  Tensor& qn = op.norm("self_attn.q_norm", q, &W.q_norm, eps);
  Tensor& qr = op.run(OpKind::kRope, "self_attn.q_rope", {&qn, &pos}, {}, ra);
  Tensor& kn = op.norm("self_attn.k_norm", kraw, &W.k_norm, eps);
  Tensor& k = op.run(OpKind::kRope, "self_attn.k_rope", {&kn, &pos}, {}, ra);
  // Full layers: V is the raw k_proj output with the no-scale v_norm.
  Tensor& v = op.norm("self_attn.v_norm", spec.has_v_proj ? *vraw : kraw, nullptr, eps);

  Tensor& attn = attend(layer_exec, li, pass, op.step, qr, k, v, pos);
  if (pass == Pass::kEncoder) {
    // Append to the cache, evicting what the sliding window no longer needs;
    // the new cache is built in a workspace slot, which then takes the old
    // storage for the next append.
    OpAttrs evict;
    evict.skip_rows = lc.evicted_by(M);
    using Grow = std::tuple<Tensor*, const Tensor*, const char*>;
    for (auto [cached, fresh, site] : {Grow{&lc.keys, &k, "kv_cache.keys"}, Grow{&lc.values, &v, "kv_cache.values"},
                                       Grow{&lc.positions, &pos, "kv_cache.positions"}}) {
      Tensor& grown = op.run(OpKind::kConcatRows, site, {cached, fresh}, {}, evict);
      std::swap(*cached, grown);
    }
  }

  Tensor& o = op.linear("self_attn.o_proj", attn, W.o_proj);
  Tensor& on = op.norm("post_attention_layernorm", o, &W.post_attention_layernorm, eps);
  Tensor& x1 = op.add("attention_residual", x, on);

  // Dense MLP branch.
  Tensor& z = op.norm("pre_feedforward_layernorm", x1, &W.pre_feedforward_layernorm, eps);
  Tensor& gate = op.linear("mlp.gate_proj", z, W.mlp_gate);
  Tensor& up = op.linear("mlp.up_proj", z, W.mlp_up);
  Tensor& act = op.run(OpKind::kGeluGlu, "mlp.act", {&gate, &up}, {});
  Tensor& mlp = op.linear("mlp.down_proj", act, W.mlp_down);
  Tensor& h1 = op.norm("post_feedforward_layernorm_1", mlp, &W.post_feedforward_layernorm_1, eps);

  // Routed experts: the router sees the raw residual x1 (docs/model.md §1.5).
  Tensor& idx = workspace_.slot("router.top_k_index");
  Tensor& wts = workspace_.slot("router.top_k_weights");
  {
    OpAttrs r;
    r.eps = eps;
    r.top_k = config_.top_k_experts;
    op.run_into(OpKind::kRouterTopk, "router", {&x1}, {&W.router_scale, &W.router_proj, &W.router_per_expert_scale},
                {&idx, &wts}, r);
  }
  const std::string prefix = std::string(pass_name(pass)) + ".router." + std::to_string(li);
  exec_.tap(prefix + ".top_k_index", idx);
  exec_.tap(prefix + ".top_k_weights", wts);
  Tensor& xe = op.norm("pre_feedforward_layernorm_2", x1, &W.pre_feedforward_layernorm_2, eps);
  Tensor& moe = routed_experts(layer_exec, li, pass, op.step, xe, idx, wts);
  Tensor& h2 = op.norm("post_feedforward_layernorm_2", moe, &W.post_feedforward_layernorm_2, eps);

  Tensor& hs = op.add("ffn_sum", h1, h2);
  Tensor& hn = op.norm("post_feedforward_layernorm", hs, &W.post_feedforward_layernorm, eps);
  Tensor& x2 = op.add("ffn_residual", x1, hn);
  // The whole residual stream is scaled by this pass's own layer scalar.
  const WeightRef& s = pass == Pass::kEncoder ? W.encoder_layer_scalar : W.decoder_layer_scalar;
  // Swapped, not copied: the slot takes the old residual (rewritten by the
  // next layer), and a device-resident x moves without a host copy.
  std::swap(x, op.run(OpKind::kScale, "layer_scalar", {&x2}, {&s}));
}

// The routed experts; for an observer that asks (OpObserver::wants_expert_inputs)
// also their inputs, tapped per layer: what the gate/up projections see (xe,
// [M, H]) and what each (token, slot) feeds its expert's down projection
// ([M, k, I], the op's second output). PTQ calibration reads these
// (docs/formats.md §3.5).
Tensor& DiffusionGemma::routed_experts(Executor& ex, int li, Pass pass, int step, const Tensor& xe, const Tensor& idx,
                                       const Tensor& wts) {
  const LayerWeights& W = weights_.layers[size_t(li)];
  OpSite op{ex, li, pass, step, workspace_};
  OpObserver* obs = exec_.observer();
  if (!obs || !obs->wants_expert_inputs())
    return op.run(OpKind::kMoeExperts, "experts", {&xe, &idx, &wts}, {&W.experts_gate_up, &W.experts_down});
  Tensor& out = workspace_.slot("experts");
  Tensor& down_in = workspace_.slot("experts.down_input");
  op.run_into(OpKind::kMoeExperts, "experts", {&xe, &idx, &wts}, {&W.experts_gate_up, &W.experts_down},
              {&out, &down_in});
  const std::string prefix = std::string(pass_name(pass)) + ".experts." + std::to_string(li);
  exec_.tap(prefix + ".input", xe);
  exec_.tap(prefix + ".down_input", down_in);
  return out;
}

Tensor& DiffusionGemma::attend(Executor& ex, int li, Pass pass, int step, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& pos) {
  const LayerSpec& spec = config_.layer(li);
  OpSite op{ex, li, pass, step, workspace_};
  // One sequence: queries qs at positions ps over its cache and its new keys
  // ks / values vs.
  auto one = [&](const KvCache& cache, const Tensor& qs, const Tensor& ks, const Tensor& vs,
                 const Tensor& ps) -> Tensor& {
    const LayerCache& lc = cache.layers[size_t(li)];
    OpAttrs aa;
    int64_t first = 0;
    if (pass == Pass::kEncoder) {
      encoder_mask(spec, aa);
    } else if (spec.type == LayerType::kSliding) {
      if (options_.decoder_window == DecoderWindow::kPerQuery) {
        aa.mask = AttentionMask::kCommittedWindow;
        aa.window = config_.sliding_window;
        aa.first_canvas_pos = cache.length;
      }
      const int64_t visible =
          options_.decoder_window == DecoderWindow::kStatic ? config_.sliding_window : config_.sliding_window - 1;
      first = std::max<int64_t>(0, lc.size() - visible);
    }
    // The keys a query sees: the cache's rows first.. and then the new ones.
    // The op reads the cache where it lies (a device backend's memory),
    // without gathering it with the new rows first.
    aa.skip_rows = first;
    if (mask_uses_blocks(aa.mask))
      return op.run(OpKind::kAttention, "self_attn.attention",
                    {&qs, &ks, &vs, &ps, &ps, &lc.keys, &lc.values, &lc.positions, encoder_blocks_}, {}, aa);
    return op.run(OpKind::kAttention, "self_attn.attention",
                  {&qs, &ks, &vs, &ps, &ps, &lc.keys, &lc.values, &lc.positions}, {}, aa);
  };
  if (batch_.empty()) return one(cache_, q, k, v, pos);
  // A batched pass: each sequence's rows are sliced out of the stacked q, k
  // and v, attend on their own, and the outputs are stacked again in row
  // order — all with concat_rows, so that the rows never leave a device.
  const Tensor no_q = Tensor::f32({0, q.dim(1), q.dim(2)}), no_kv = Tensor::f32({0, k.dim(1), k.dim(2)});
  const Tensor none = Tensor::f32({0, q.dim(1) * q.dim(2)});
  Tensor* stacked = nullptr;
  for (size_t i = 0; i < batch_.size(); ++i) {
    const BatchSegment& seg = batch_[i];
    OpAttrs rows;
    rows.skip_rows = seg.row0;
    rows.take_rows = seg.rows;
    Tensor& qs = op.run(OpKind::kConcatRows, "attention.query_rows", {&q, &no_q}, {}, rows);
    Tensor& ks = op.run(OpKind::kConcatRows, "attention.new_keys", {&k, &no_kv}, {}, rows);
    Tensor& vs = op.run(OpKind::kConcatRows, "attention.new_values", {&v, &no_kv}, {}, rows);
    Tensor& out = one(*seg.cache, qs, ks, vs, *seg.positions);
    // Two slots in turn: an op's output must not be its input.
    stacked = &op.run(OpKind::kConcatRows, i % 2 ? "attention.stacked_odd" : "attention.stacked_even",
                      {stacked ? stacked : &none, &out}, {});
  }
  return *stacked;
}

void DiffusionGemma::run_layers(Pass pass, Tensor& x, const Tensor& pos) {
  const std::string prefix(pass_name(pass));
  // Every process needs the decoder's final states for the (replicated) LM
  // head and sampler; the encoder's are not used after the cache is written.
  schedule_->run(config_.num_layers, x, pass == Pass::kDecoder, [&](int li) {
    exec_.tap(prefix + ".layer_in." + std::to_string(li), x);
    run_layer(li, pass, x, pos);
    exec_.tap(prefix + ".layer_out." + std::to_string(li), x);
  });
}

// Encoder pass (docs/model.md §2.2): causal over the new tokens, appends to the cache.
// The encoder's input rows: the scaled embedding of the prompt.
Tensor& DiffusionGemma::encoder_embedding(const std::vector<int32_t>& ids_in) {
  const int64_t n = int64_t(ids_in.size());
  Tensor ids = Tensor::i32({n});
  for (int64_t k = 0; k < n; ++k) {
    int32_t id = ids_in[size_t(k)];
    if (id < 0 || id >= config_.vocab_size)
      throw Error("encode: token id " + std::to_string(id) + " at position " + std::to_string(k) +
                  " is out of range [0, " + std::to_string(config_.vocab_size) + ")");
    // Image placeholders become pad before the lookup (docs/model.md §2.2).
    ids.i[size_t(k)] = (id == config_.image_token_id) ? int32_t(config_.pad_token_id) : id;
  }
  OpSite op{exec_, -1, Pass::kEncoder, 0, workspace_};
  Tensor& x = op.run(OpKind::kEmbedding, "embed_tokens", {&ids}, {&weights_.embed}, embedding_attrs());
  exec_.tap("encoder.embeddings", x);
  return x;
}

void DiffusionGemma::encoder_mask(const LayerSpec& spec, OpAttrs& aa) const {
  const bool sliding = spec.type == LayerType::kSliding;
  aa.mask = AttentionMask::kCausalWindow;
  aa.window = sliding ? config_.sliding_window : 0;
  if (!encoder_blocks_) return;
  // docs/model.md §7.7: hf lets a block's rows see each other on every layer
  // (past the window too); jax only on sliding layers, within ±window.
  if (options_.image_mask == ImageMask::kHf)
    aa.mask = AttentionMask::kCausalWindowBlocks;
  else if (options_.image_mask == ImageMask::kJax && sliding)
    aa.mask = AttentionMask::kJaxBlocks;
}

void DiffusionGemma::encode(const std::vector<int32_t>& ids_in) {
  if (ids_in.empty()) return;
  encode_rows(encoder_embedding(ids_in), int64_t(ids_in.size()), nullptr);
}

void DiffusionGemma::encode_with_images(const std::vector<int32_t>& ids, std::span<const VisionInput> images) {
  // Each image's soft tokens are copied out: the tower's output slot is
  // reused by the next image.
  std::vector<Tensor> soft;
  for (const VisionInput& image : images) {
    const Tensor& t = image_soft_tokens(image);
    t.ensure_host();
    Tensor copy = Tensor::f32(t.shape);
    copy.f = t.f;
    soft.push_back(std::move(copy));
  }
  encode_soft_tokens(ids, soft);
}

void DiffusionGemma::encode_soft_tokens(const std::vector<int32_t>& ids, std::span<const Tensor> soft_tokens) {
  const int64_t H = config_.hidden_size;
  std::vector<int64_t> n_soft;
  for (size_t i = 0; i < soft_tokens.size(); ++i) {
    const Tensor& t = soft_tokens[i];
    if (t.dtype != DType::kF32 || t.shape.size() != 2 || t.dim(1) != H)
      throw Error("encode: the soft tokens of image " + std::to_string(i) + " must be F32 [n, " + std::to_string(H) +
                  "], got " + t.shape_string());
    n_soft.push_back(t.dim(0));
  }
  const std::vector<ImageRun> runs = match_image_runs(ids, config_.image_token_id, n_soft, "encode");
  if (runs.empty()) {
    encode(ids);
    return;
  }
  const int64_t n = int64_t(ids.size());
  Tensor& e = encoder_embedding(ids);
  // docs/model.md §7.6: the soft tokens, in prompt order, replace the
  // placeholder rows (whose pad embedding they overwrite, unscaled).
  int64_t total = 0;
  for (int64_t c : n_soft) total += c;
  Tensor src = Tensor::f32({total, H});
  Tensor rows = Tensor::i32({total});
  int64_t r = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Tensor& t = soft_tokens[i];
    t.ensure_host();
    std::copy(t.f.begin(), t.f.end(), src.f.begin() + r * H);
    for (int64_t k = 0; k < runs[i].count; ++k) rows.i[size_t(r + k)] = int32_t(runs[i].first + k);
    r += runs[i].count;
  }
  OpSite op{exec_, -1, Pass::kEncoder, 0, workspace_};
  Tensor& x = op.run(OpKind::kScatterRows, "merge_soft_tokens", {&e, &src, &rows}, {});
  exec_.tap("vision.soft_tokens", src);
  exec_.tap("encoder.merged_embeddings", x);
  Tensor blocks = Tensor::i32({n});
  blocks.i = image_blocks(ids, config_.image_token_id);
  if (exec_.observer() && cache_.length == 0) tap_image_masks(blocks);
  encode_rows(x, n, options_.image_mask == ImageMask::kCausal ? nullptr : &blocks);
}

// For an observer (the parity tool): the masks of this pass as [n, n] 0/1
// (1: the query row may see the key row), from the rule the attention ops
// implement (image_prompt.h image_mask_allows); from an empty cache only,
// where the keys are exactly the new rows.
void DiffusionGemma::tap_image_masks(const Tensor& blocks) {
  const int64_t n = blocks.numel();
  for (const auto& [name, window] :
       {std::pair<const char*, int64_t>{"encoder.mask.full_attention", 0},
        std::pair<const char*, int64_t>{"encoder.mask.sliding_attention", config_.sliding_window}}) {
    Tensor m = Tensor::i32({n, n});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        m.i[size_t(i * n + j)] = image_mask_allows(options_.image_mask, window, i, j, blocks.i) ? 1 : 0;
    exec_.tap(name, m);
  }
}

void DiffusionGemma::encode_rows(Tensor& x, int64_t n, const Tensor* blocks) {
  struct Blocks {
    const Tensor*& slot;
    ~Blocks() { slot = nullptr; }
  } scoped{encoder_blocks_};
  encoder_blocks_ = blocks;
  decoder_step_ = 0;
  processed_valid_ = false;
  Tensor pos = positions_tensor(cache_.length, n);
  OpSite op{exec_, -1, Pass::kEncoder, 0, workspace_};
  run_layers(Pass::kEncoder, x, pos);
  cache_.length += n;
  // The final norm is not needed for generation; compute it only when
  // someone observes it.
  if (exec_.observer()) {
    Tensor& h = op.norm("norm", x, &weights_.final_norm, float(config_.rms_norm_eps));
    exec_.tap("encoder.last_hidden_state", h);
  }
}

void DiffusionGemma::decode(const int32_t* canvas, const float* self_conditioning, float* logits) {
  decode_n(canvas, config_.canvas_length, self_conditioning, logits);
}

void DiffusionGemma::decode_n(const int32_t* canvas, int64_t n, const float* sc, float* logits_out) {
  const int64_t V = config_.vocab_size;
  processed_valid_ = false;
  const Tensor* sct = nullptr;
  if (sc) {
    Tensor& scl = workspace_.slot("self_conditioning.input");
    scl.dtype = DType::kF32;
    scl.resize({n, V});
    std::memcpy(scl.f.data(), sc, size_t(n * V) * 4);
    scl.host_written();
    sct = &scl;
  }
  const Tensor& logits = decode_logits(canvas, n, sct);
  logits.ensure_host();
  std::memcpy(logits_out, logits.f.data(), size_t(n * V) * 4);
  ++decoder_step_;
}

// Decoder pass (docs/model.md §2.3).
Tensor DiffusionGemma::canvas_ids(const int32_t* canvas, int64_t n) const {
  const int64_t V = config_.vocab_size;
  Tensor ids = Tensor::i32({n});
  for (int64_t k = 0; k < n; ++k) {
    if (canvas[k] < 0 || canvas[k] >= V)
      throw Error("decode: canvas token id " + std::to_string(canvas[k]) + " at canvas position " + std::to_string(k) +
                  " is out of range [0, " + std::to_string(V) + ")");
    ids.i[size_t(k)] = canvas[k];
  }
  return ids;
}

const Tensor& DiffusionGemma::decode_logits(const int32_t* canvas, int64_t n, const Tensor* sc) {
  Tensor ids = canvas_ids(canvas, n);
  Tensor pos = positions_tensor(cache_.length, n);
  Tensor& x = decoder_input(ids, sc, sc ? n : 0);
  run_layers(Pass::kDecoder, x, pos);
  return decoder_output(x);
}

// The decoder's input rows (docs/model.md §2.3): the token embeddings and, on the
// first sc_rows rows, the self-conditioning MLP of the soft embedding of `sc`
// [sc_rows, V] added; then the parameter-free post norm. Rows without a
// signal keep the embedding itself: through RMSNorm(0), the bias-free MLP and
// gelu(0) a zero signal stays exactly zero.
Tensor& DiffusionGemma::decoder_input(const Tensor& ids, const Tensor* sc, int64_t sc_rows) {
  OpSite op{exec_, -1, Pass::kDecoder, decoder_step_, workspace_};
  const float eps = float(config_.rms_norm_eps);
  const OpAttrs ea = embedding_attrs();
  Tensor& e = op.run(OpKind::kEmbedding, "embed_tokens", {&ids}, {&weights_.embed}, ea);
  exec_.tap("decoder.embeddings", e);
  const Tensor* sum = &e;
  if (sc && sc_rows > 0) {
    Tensor& s = op.run(OpKind::kSoftEmbedding, "self_conditioning.soft_embedding", {sc}, {&weights_.embed}, ea);
    Tensor& g = op.norm("self_conditioning.pre_norm", s, &weights_.sc_pre_norm, eps);
    Tensor& gate = op.linear("self_conditioning.gate_proj", g, weights_.sc_gate);
    Tensor& up = op.linear("self_conditioning.up_proj", g, weights_.sc_up);
    Tensor& act = op.run(OpKind::kGeluGlu, "self_conditioning.act", {&gate, &up}, {});
    Tensor& scout = op.linear("self_conditioning.down_proj", act, weights_.sc_down);
    if (sc_rows == ids.numel()) {
      sum = &op.add("self_conditioning.residual", e, scout);
    } else {
      // A batch (decode_batch) whose conditioned rows come first.
      const Tensor none = Tensor::f32({0, e.dim(1)});
      OpAttrs head, tail;
      head.take_rows = sc_rows;
      tail.skip_rows = sc_rows;
      Tensor& e_sc = op.run(OpKind::kConcatRows, "self_conditioning.conditioned_rows", {&e, &none}, {}, head);
      Tensor& e_rest = op.run(OpKind::kConcatRows, "self_conditioning.unconditioned_rows", {&e, &none}, {}, tail);
      Tensor& mixed = op.add("self_conditioning.residual", e_sc, scout);
      sum = &op.run(OpKind::kConcatRows, "self_conditioning.rows", {&mixed, &e_rest}, {});
    }
  }
  Tensor& x = op.norm("self_conditioning.post_norm", *sum, nullptr, eps);
  exec_.tap("decoder.self_conditioning_out", x);
  return x;
}

// Final norm, LM head (the tied embedding) and logit softcap (docs/model.md §2.3).
Tensor& DiffusionGemma::decoder_output(const Tensor& x) {
  OpSite op{exec_, -1, Pass::kDecoder, decoder_step_, workspace_};
  Tensor& h = op.norm("norm", x, &weights_.final_norm, float(config_.rms_norm_eps));
  exec_.tap("decoder.last_hidden_state", h);
  Tensor* logits = &op.linear("lm_head", h, weights_.embed);
  if (config_.final_logit_softcapping > 0.0) {
    OpAttrs ca;
    ca.cap = float(config_.final_logit_softcapping);
    logits = &op.run(OpKind::kSoftcap, "final_logit_softcapping", {logits}, {}, ca);
  }
  exec_.tap("decoder.logits", *logits);
  return *logits;
}

ThreadPool* DiffusionGemma::thread_pool() { return own_backend_->host_pool(); }

void DiffusionGemma::set_layer_backends(std::vector<Backend*> layer_backends) {
  if (!layer_backends.empty() && int(layer_backends.size()) != config_.num_layers)
    throw Error("set_layer_backends: expected " + std::to_string(config_.num_layers) + " entries, got " +
                std::to_string(layer_backends.size()));
  layer_backends_ = std::move(layer_backends);
}

void DiffusionGemma::truncate_cache(int64_t length) {
  if (length < 0 || length > cache_.length)
    throw Error("truncate_cache: length " + std::to_string(length) + " is outside [0, " +
                std::to_string(cache_.length) + "]");
  for (size_t i = 0; i < cache_.layers.size(); ++i) {
    LayerCache& lc = cache_.layers[i];
    // Sliding layers have evicted old rows; truncating is exact only while
    // the rows the window needs are still there.
    if (lc.retain > 0 && length > 0 && length < cache_.length) {
      const int64_t need = std::min<int64_t>(length, lc.retain);
      const int64_t first_needed = length - need;
      lc.positions.ensure_host();
      if (lc.size() == 0 || lc.positions.i.front() > first_needed)
        throw Error("truncate_cache: cannot truncate to " + std::to_string(length) + ": layer " + std::to_string(i) +
                    " has already evicted position " + std::to_string(first_needed) + " (sliding window)");
    }
    lc.truncate(length);
  }
  cache_.length = length;
  decoder_step_ = 0;
  processed_valid_ = false;
}

}  // namespace dgemma

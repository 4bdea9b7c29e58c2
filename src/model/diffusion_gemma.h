#pragma once
// The DiffusionGemma text model on the op vocabulary (docs/model.md §2): an encoder
// pass that fills the KV cache and a decoder pass with self-conditioning that
// produces soft-capped logits for a canvas. Which backend executes the ops is
// the caller's choice (CPU reference by default).
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/diffusion_model.h"
#include "io/safetensors.h"
#include "checkpoint/config.h"
#include "model/decode_item.h"
#include "model/image_prompt.h"
#include "model/kv_cache.h"
#include "model/vision_tower.h"
#include "model/workspace.h"
#include "model/weights.h"
#include "ops/backend.h"
#include "placement/layer_schedule.h"
#include "placement/stage_transport.h"

namespace dgemma {

// Which committed keys the decoder's sliding layers see (docs/model.md §2.4).
enum class DecoderWindow {
  kReference,  // HF dynamic cache: the last W-1 committed keys for every query (default)
  kStatic,     // HF static cache: the last W committed keys
  kPerQuery,   // JAX after its 2026-07 fix: canvas query i sees committed keys > pos_i - W
};

// The model's own choices. Where and how its ops run (threads, the dot
// modes of a CPU or device) is the backend's business: the backend given to
// load() (backend/cpu/cpu_backend.h CpuBackendOptions, backend/backend_factory.h).
struct ModelOptions {
  WeightPrecision precision = WeightPrecision::kAsStored;
  DecoderWindow decoder_window = DecoderWindow::kReference;
  ImageMask image_mask = ImageMask::kHf;  // the encoder's mask over a prompt with images (docs/model.md §7.7)
  bool verify_tied_copies = true;
  LoadQuantization quantize = LoadQuantization::kNone;  // quantize at load (quantize/load_quantize.h)
  int load_threads = 0;  // threads that quantize at load; 0 = all cores (the bytes do not depend on it)
  // Loading progress (weights.h BindOptions::progress); optional.
  std::function<void(int64_t done, int64_t total)> load_progress;
};

class DiffusionGemma : public DiffusionModel {
 public:
  // Loads a checkpoint folder (config.json + safetensors) or a GGUF file
  // (checkpoint/checkpoint_source.h); its ops run on
  // `backend`, which the model owns (set_backend() can route them to another
  // one later; this one still serves thread_pool()).
  static std::unique_ptr<DiffusionGemma> load(const std::string& dir, std::unique_ptr<Backend> backend,
                                              const ModelOptions& options = {});
  // Same, with an explicit config file (e.g. an alternative spelling; empty:
  // the folder's config.json; a GGUF file takes none).
  static std::unique_ptr<DiffusionGemma> load(const std::string& dir, const std::string& config_path,
                                              std::unique_ptr<Backend> backend, const ModelOptions& options);

  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t canvas_length() const override { return config_.canvas_length; }
  int64_t cache_length() const override { return cache_.length; }
  // The host pool of the backend given to load() (Backend::host_pool).
  ThreadPool* thread_pool() override;
  void encode(const std::vector<int32_t>& ids) override;
  // Runs the vision tower on each image (image_soft_tokens), then
  // encode_soft_tokens().
  void encode_with_images(const std::vector<int32_t>& ids, std::span<const VisionInput> images) override;
  // The encoder pass over a prompt whose images are already soft tokens
  // (docs/model.md §7.6): soft_tokens[i] [n_soft_i, H] F32 replaces the i-th
  // run of image placeholder ids, which must hold exactly n_soft_i ids
  // (dgemma::Error naming both numbers otherwise; also when the numbers of
  // runs and images differ). The mask follows options().image_mask
  // (docs/model.md §7.7), with the image blocks of this call's ids.
  void encode_soft_tokens(const std::vector<int32_t>& ids, std::span<const Tensor> soft_tokens);
  // The encoder's mask over prompts with images from now on.
  void set_image_mask(ImageMask mask) { options_.image_mask = mask; }
  void decode(const int32_t* canvas, const float* self_conditioning, float* logits) override;
  void truncate_cache(int64_t length) override;
  // The sampler pass runs as the sample op on the model's backend, right
  // after the LM head; z stays in a model-owned tensor and is the next
  // pass's soft_embedding input (no host copy of the logits in between).
  bool samples_rows() const override { return true; }
  void decode_sample(const int32_t* canvas, bool use_self_conditioning, float temperature, const double* uniforms,
                     RowSamples& out) override;
  void processed_logits(float* out) override;

  // Decoder pass over any number of canvas positions (n may differ from
  // canvas_length(), e.g. for the parity tool). logits: [n, vocab].
  void decode_n(const int32_t* canvas, int64_t n, const float* self_conditioning, float* logits);
  // One decoder pass over the canvases of several sequences, each against its
  // own KV cache (the server's batching): the canvases are stacked into one
  // [Σn, H] activation, every row-wise op runs once over all rows, and only
  // RoPE positions (each item's start at its cache length) and attention
  // (each item's queries see its own cache and its own new rows) are per
  // item. Each item's logits are bit-identical to a decode_n() with its cache
  // swapped in (the CPU kernels compute every row independently of the row
  // count; tests/model/batched_decode_test.cc). Ops are labelled with
  // decoder_step(), which the pass advances like decode() does; observers see
  // the stacked rows (self-conditioned items first). Throws dgemma::Error
  // for a missing pointer, an out-of-range id or a cache of another layout,
  // and BadLogitsRow (ops/row_sampling.h) for the first bad row of a sampling item.
  // Sampling items (DecodeItem::samples) get exactly what decode_sample()
  // gives their sequence alone; the host copies are only the items' O(n)
  // samples and the logits of the items that ask for them.
  void decode_batch(std::span<const DecodeItem> items);

  // Whether the checkpoint has a vision tower (docs/model.md §7.1).
  bool has_vision_tower() const { return vision_ != nullptr; }
  // The soft tokens [image.n_soft, H_text] of one image (docs/model.md §7),
  // computed with the model's backend and observer (Pass::kVision ops, the
  // vision.* taps). Valid until the next call. Throws dgemma::Error when the
  // model has no tower or the image does not fit it.
  const Tensor& image_soft_tokens(const VisionInput& image);

  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  const ModelWeights& weights() const { return weights_; }
  const KvCache& cache() const { return cache_; }
  // A cache with this model's layer layout (kv heads, head dim, sliding
  // retention) holding no positions.
  KvCache empty_cache() const;
  // Exchanges the model's KV cache with `other`, which must have this
  // model's layout (e.g. from empty_cache()). Lets several sequences take
  // turns on one model, each with its own cache (src/server/scheduler.h).
  // Throws dgemma::Error naming the first mismatching layer.
  void swap_cache(KvCache& other);
  // Throws dgemma::Error (prefixed with `who`) naming the first layer where
  // `cache` does not have this model's layout.
  void check_cache_layout(const KvCache& cache, const std::string& who) const;
  Executor& executor() { return exec_; }
  // Observer of every op and named tap (nullptr: none). Observation never
  // changes results.
  void set_observer(OpObserver* observer) { exec_.set_observer(observer); }
  // Replaces the backend that executes ops (the model does not own it).
  void set_backend(Backend& backend) { exec_ = Executor(backend, exec_.observer()); }
  // Pipeline stages (placement): layer i runs on layer_backends[i] (nullptr:
  // the model's backend); embedding, self-conditioning and LM head stay on
  // the model's backend. The backends are not owned.
  void set_layer_backends(std::vector<Backend*> layer_backends);
  // Multi-process pipeline (placement/layer_schedule.h PipelineSchedule):
  // layers not owned by this rank are skipped, hidden states cross stage
  // boundaries through the transport (not owned; null: every layer here).
  void set_stage_transport(StageTransport* transport) { schedule_ = make_layer_schedule(transport); }
  // Denoising step index reported with decoder ops (counts decode calls since
  // the last encode).
  int decoder_step() const { return decoder_step_; }

 private:
  friend class LayerwiseRunner;  // one layer at a time (model/layerwise_runner.h)
  DiffusionGemma(ModelConfig config, TensorStore store, std::unique_ptr<Backend> backend, const ModelOptions& options);
  void run_layer(int layer, Pass pass, Tensor& x, const Tensor& positions);
  // The rows of one sequence in a batched decoder pass (decode_batch).
  struct BatchSegment {
    const KvCache* cache;
    int64_t row0, rows;
    const Tensor* positions;  // [rows]
  };
  // Self-attention of one layer over the rotated queries q, keys k and
  // values v of the pass's new rows: each sequence's queries see its cached
  // rows (with the decoder window of docs/model.md §2.4) and its own new rows. One
  // sequence (the model's cache) outside decode_batch, else every segment
  // of batch_. Returns [rows, Hq·d] in a workspace slot.
  Tensor& attend(Executor& ex, int layer, Pass pass, int step, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& positions);
  Tensor& routed_experts(Executor& ex, int layer, Pass pass, int step, const Tensor& xe, const Tensor& idx,
                         const Tensor& wts);
  // All layers in order with taps, as the layer schedule runs them.
  void run_layers(Pass pass, Tensor& x, const Tensor& positions);
  // Whether this run computes like the reference in bf16 (--precision bf16
  // and bf16-dot) rather than in float32 (fp32, the parity mode; §6.1).
  bool bf16_run() const { return options_.precision == WeightPrecision::kBF16; }
  float embed_scale() const;
  // The encoder's input rows [n, H] of `ids` (checked; image placeholders
  // read as pad), in a workspace slot.
  Tensor& encoder_embedding(const std::vector<int32_t>& ids);
  // The encoder pass over the input rows x of `ids` (blocks: the image
  // blocks of the rows, or null for the text mask).
  void encode_rows(Tensor& x, int64_t n, const Tensor* blocks);
  // Taps encoder.mask.{full,sliding}_attention of an image pass from an empty cache.
  void tap_image_masks(const Tensor& blocks);
  // The attention mask and window of an encoder layer (docs/model.md §2.2, §7.7).
  void encoder_mask(const LayerSpec& spec, OpAttrs& attrs) const;
  // The canvas as an I32 tensor, every id checked against the vocabulary.
  Tensor canvas_ids(const int32_t* canvas, int64_t n) const;
  OpAttrs embedding_attrs() const;
  // The decoder pass up to the (soft-capped) logits [n, vocab], which stay
  // in the workspace (valid until the next pass); `sc`: self-conditioning
  // logits [n, vocab] or null. Does not advance decoder_step_.
  Tensor& decoder_input(const Tensor& ids, const Tensor* sc, int64_t sc_rows);
  Tensor& decoder_output(const Tensor& x);
  const Tensor& decode_logits(const int32_t* canvas, int64_t n, const Tensor* sc);
  // The sampler pass (the sample op, docs/model.md §3.2) over `logits` [n, vocab] of
  // decoder step `step` into z, with the uniforms (n values or null) and
  // outputs in the workspace slots named `slots` + ".uniforms" etc.;
  // sample_rows_out() then reads the outputs (on the host: ensure_host first)
  // into `out`, throwing BadLogitsRow for a row a device marked.
  struct SampleSlots {
    Tensor *uniforms, *argmax, *entropy, *sample;
  };
  SampleSlots sample_rows(const Tensor& logits, Tensor& z, float temperature, const double* uniforms, int step,
                          const std::string& slots);
  void sample_rows_out(const SampleSlots& s, Tensor& z, int step, RowSamples& out) const;

  ModelConfig config_;
  TensorStore store_;
  ModelWeights weights_;
  ModelOptions options_;
  std::unique_ptr<Backend> own_backend_;
  Executor exec_;
  KvCache cache_;
  Workspace workspace_;  // activation buffers reused by every pass (model/workspace.h)
  int decoder_step_ = 0;
  // z of the last decode_sample() (the sample op's output), and whether it
  // is the previous pass's (encode, decode, truncate and swap_cache void it).
  Tensor processed_;
  bool processed_valid_ = false;
  std::vector<BatchSegment> batch_;  // set while decode_batch runs its layers
  // The image blocks of the encoder pass that runs (one id per new row,
  // image_prompt.h image_blocks); null: the text mask.
  const Tensor* encoder_blocks_ = nullptr;
  std::vector<Backend*> layer_backends_;
  std::unique_ptr<LayerSchedule> schedule_ = make_layer_schedule(nullptr);
  std::unique_ptr<VisionTower> vision_;  // null without a tower
};

DecoderWindow parse_decoder_window(const std::string& name);

}  // namespace dgemma

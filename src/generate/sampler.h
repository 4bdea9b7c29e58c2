#pragma once
// The per-step math of the entropy-bound sampler (spec §3.2; HF
// generation_diffusion_gemma.py `LinearTemperatureScheduleLogitsProcessor`,
// `EntropyBoundSampler`, `StableAndConfidentStoppingCriteria`), as pure
// functions. Float32 is used wherever the reference computes in float32, with
// the same operation order, so that temperatures are bit-exact and the
// discrete decisions (argmax, acceptance, stop) match.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dgemma/error.h"

namespace dgemma {

// A row of logits the sampler cannot use: it holds a NaN or +inf logit, or
// every logit is -inf (softmax needs a finite maximum, spec §3.2). The
// message is "WHERE[ row R]: logit V is nan|inf" or "WHERE[ row R]: every
// logit is -inf"; row is -1 when the thrower does not know it (process_row).
class BadLogitsRow : public Error {
 public:
  // logit: the first NaN or +inf logit of the row, -1 when every logit is -inf.
  BadLogitsRow(const std::string& where, int64_t row, int64_t logit, float value);
  int64_t row() const { return row_; }
  int64_t logit() const { return logit_; }
  float value() const { return value_; }
  // The message without its location: "logit 5 is nan", "every logit is -inf".
  std::string reason() const;

 private:
  int64_t row_, logit_;
  float value_;
};

// The sample op (ops/op.h kSample) on a device, whose kernels cannot throw,
// marks a row it cannot sample in its argmax output: bad_row_mark(first bad
// logit) = -2 - logit, or -1 when every logit is -inf (entropy NaN, sample
// -1). A valid argmax is never negative.
inline int32_t bad_row_mark(int64_t logit) { return logit < 0 ? -1 : int32_t(-2 - logit); }
// Throws the BadLogitsRow the CPU op throws for the first marked row of a
// sample op's outputs (argmax[M], z[M, vocab] = its processed logits, which
// hold the bad value); returns when no row is marked.
void throw_marked_row(std::span<const int32_t> argmax, const float* z, int64_t vocab, const std::string& where);
// How the sample op is named in those errors: "op sample (SITE), decoder
// pass, step S".
std::string sample_op_where(std::string_view site, int step);

// T = t_min + (t_max - t_min) * (cur_step / N), evaluated as torch does with
// an int32 cur_step tensor and Python-float t_min/t_max: cur_step / N is a
// float32 division, (t_max - t_min) is a double rounded to float32, then a
// float32 multiply and add. cur_step counts remaining steps, N .. 1.
float step_temperature(double t_min, double t_max, int64_t cur_step, int64_t max_denoising_steps);

// z = logits / T in place, as float32 division (not a reciprocal multiply),
// which is what makes the processed logits bit-exact with the reference.
void apply_temperature(std::span<float> logits, float temperature);

struct RowStats {
  int32_t argmax = 0;   // first maximum, like torch.argmax
  float entropy = 0.f;  // nats, of Categorical(logits = z)
};

// Argmax and entropy of one row of processed logits. The entropy is
// torch.distributions.Categorical(logits=z).entropy() = -sum softmax(z) *
// log_softmax(z), evaluated with the shift d = z - max z as
// log(S) - sum(e * d) / S, e = exp(d), S = sum e, in double; this differs from
// torch's float32 reduction only by rounding (~1e-7). -inf logits are allowed
// (zero probability); NaN or +inf throws dgemma::Error naming `where`.
RowStats row_stats(std::span<const float> z, const char* where = "row_stats");

// The fused per-row pass of a denoising step (spec §3.2, §3.3): one row of
// raw logits becomes z = raw / T in place (float32 division, as
// apply_temperature), and the same sweep finds the first maximum; a second
// sweep writes p = exp(z - max z) (fp32) into `scratch` (V floats, one buffer
// per thread) and sums p and p·(z - max z) in double for the entropy (exactly
// row_stats); then, if `uniform` is given, the categorical sample is the
// inverse CDF of p at uniform · sum p (exactly RandomDraws::sample_token).
// NaN or +inf logits, or a row of -inf, throw dgemma::Error naming `where`.
struct RowPass {
  int32_t argmax = 0;
  float entropy = 0.f;
  int32_t sample = -1;  // -1 when no uniform was given
};
RowPass process_row(float* row, size_t vocab, float temperature, const double* uniform, float* scratch,
                    const char* where);

// Inverse CDF over unnormalized fp32 weights p (the cumulative sum runs in
// double): the first index whose cumulative weight exceeds `target`, never a
// zero-weight index; the last positive one if rounding leaves target beyond
// the total. -1 if every weight is zero.
int32_t inverse_cdf(const float* p, size_t n, double target);

// Entropy-bound acceptance (HF `accept_canvas`): sort entropies ascending,
// accept the position of rank k iff float32(cumsum_k) - H_(k) <= bound, where
// the cumulative sum runs in double and is rounded to float32 per element (as
// torch's CPU cumsum does) and the bound is compared as float32. Ties are
// ordered by position (torch.sort gives no order; it only matters when tied
// entropies straddle the bound). Writes accepted[i] in {0,1}; returns the count.
int64_t entropy_bound_accept(std::span<const float> entropy, double entropy_bound, std::span<uint8_t> accepted);

// next = accepted ? sample : noise (uniform-state diffusion: a rejected
// position gets fresh noise, not its previous value; spec §3.2).
void renoise(std::span<const uint8_t> accepted, std::span<const int32_t> sample, std::span<const int32_t> noise,
             std::span<int32_t> next);

// torch.mean over the canvas in float32 (summed in double, then rounded).
float mean_entropy(std::span<const float> entropy);

// confident = mean entropy < threshold, strictly, compared in float32.
bool is_confident(float mean_entropy, double confidence_threshold);

// EOS handling of a committed canvas (HF `_finalize_canvas`): if any token is
// an EOS id, every token after the first EOS (including later EOS ids)
// becomes `pad_token_id`; the first EOS is kept. Returns whether an EOS was
// found, i.e. whether generation ends with this canvas.
bool pad_after_first_eos(std::span<int32_t> canvas, std::span<const int32_t> eos_token_ids, int32_t pad_token_id);

// The stability half of the stopping rule: stable iff the argmax canvas equals
// each of the `threshold` previous argmax canvases; the history starts filled
// with a sentinel (-1), so the first step of a canvas is never stable unless
// threshold is 0, which means always stable (spec §3.2, §6.3 pitfall 5).
class StabilityTracker {
 public:
  StabilityTracker(int64_t threshold, int64_t canvas_length);
  void reset();  // new canvas
  // Compares `argmax` with the history, then pushes it (dropping the oldest).
  bool update(std::span<const int32_t> argmax);

 private:
  int64_t threshold_;
  int64_t length_;
  std::vector<int32_t> history_;  // threshold_ rows of length_, ring buffer
  int64_t oldest_ = 0;
};

}  // namespace dgemma

#pragma once
// The per-row math of a denoising step's sampler pass (docs/model.md §3.2,
// §3.3): temperature, first argmax, entropy and the categorical draw of one
// row of logits, and the errors for a row that cannot be sampled. This is the
// part every backend runs as the sample op (ops/op.h kSample), so it sits in
// the op layer; the canvas-level rules (acceptance, renoise, stopping) are
// the generation loop's (generate/sampler.h). Float32 wherever the reference
// computes in float32, with the same operation order, so that the discrete
// decisions match it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dgemma/error.h"
#include "ops/sampling_filters.h"
#include "ops/token_penalties.h"

namespace dgemma {
// A row of logits the sampler cannot use: it holds a NaN or +inf logit, or
// every logit is -inf (softmax needs a finite maximum, docs/model.md §3.2). The
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

// The fused per-row pass of a denoising step (docs/model.md §3.2, §3.3): one row of
// raw logits becomes z = raw / T in place (float32 division, as
// apply_temperature), and the same sweep finds the first maximum; a second
// sweep writes p = exp(z - max z) (fp32) into `scratch` (V floats, one buffer
// per thread) and sums p and p·(z - max z) in double for the entropy (exactly
// row_stats); then, if `uniform` is given, the categorical sample is the
// inverse CDF of p at uniform · sum p (exactly RandomDraws::sample_token).
// With `controls`, penalties change the raw row first (z is then the
// penalized row / T) and filters zero weights of p before the draw, which is
// then the inverse CDF at uniform · (sum of the kept p).
// NaN or +inf logits, or a row of -inf, throw dgemma::Error naming `where`.
struct RowPass {
  int32_t argmax = 0;
  float entropy = 0.f;
  int32_t sample = -1;  // -1 when no uniform was given
};
// What a request may add to the row pass (docs/model.md §3.7). Without it
// (null, or nothing active) the pass is exactly the one above.
struct RowControls {
  const TokenPenalties* penalties = nullptr;  // on the raw row, before the division by T
  const SamplingFilters* filters = nullptr;   // on draw B's weights only, after the entropy
};
RowPass process_row(float* row, size_t vocab, float temperature, const double* uniform, float* scratch,
                    const char* where, const RowControls* controls = nullptr);

// Inverse CDF over unnormalized fp32 weights p (the cumulative sum runs in
// double): the first index whose cumulative weight exceeds `target`, never a
// zero-weight index; the last positive one if rounding leaves target beyond
// the total. -1 if every weight is zero.
int32_t inverse_cdf(const float* p, size_t n, double target);

}  // namespace dgemma

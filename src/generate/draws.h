#pragma once
// Where the randomness of generate() comes from (docs/model.md §3.5). Per canvas the
// reference draws, in this order: (A) the initial canvas, then per executed
// step (B) one categorical sample per position and (C) fresh uniform tokens
// for renoising. A DrawSource supplies exactly these three kinds:
//  * RandomDraws: seeded, counter-based (Philox), so every token depends only
//    on (seed, canvas, step, purpose, position) - not on thread count or on
//    the order positions are visited.
//  * ReplayDraws: the `draw.NNN` tape recorded from the reference
//    implementation (golden README "Random draws in generate()"), for
//    bit-exact replays of a Transformers run.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "generate/rng.h"

namespace dgemma {

class DrawSource {
 public:
  virtual ~DrawSource() = default;

  // Draw A: out.size() tokens uniform in [0, vocab) for canvas `canvas`.
  virtual void canvas_init(int64_t canvas, int64_t vocab, std::span<int32_t> out) = 0;

  // Draw B: one token per position from Categorical(softmax(z_i)), where
  // z = `processed_logits` is [out.size(), vocab] row-major fp32 (the
  // temperature-scaled logits). `step` is the 0-based step within the canvas.
  virtual void sample(int64_t canvas, int64_t step, const float* processed_logits, int64_t vocab,
                      std::span<int32_t> out) = 0;

  // Draw C: out.size() fresh tokens uniform in [0, vocab); generate() uses
  // only the non-accepted positions but always draws the whole canvas.
  virtual void renoise(int64_t canvas, int64_t step, int64_t vocab, std::span<int32_t> out) = 0;

  // Whether draw B is, per position, the inverse CDF of the fp32 weights
  // exp(z - max z) at uniform · their sum (sampler.h inverse_cdf), with the
  // uniform given by sample_uniform(): generate() then fuses the draw into
  // its per-row pass over the logits instead of calling sample(); the result
  // is identical.
  virtual bool samples_by_inverse_cdf() const { return false; }
  // The uniform of draw B at one position; called only when
  // samples_by_inverse_cdf() (the default throws).
  virtual double sample_uniform(int64_t canvas, int64_t step, int64_t position) const;
};

class RandomDraws final : public DrawSource {
 public:
  explicit RandomDraws(uint64_t seed) : seed_(seed) {}

  void canvas_init(int64_t canvas, int64_t vocab, std::span<int32_t> out) override;
  void sample(int64_t canvas, int64_t step, const float* processed_logits, int64_t vocab,
              std::span<int32_t> out) override;
  void renoise(int64_t canvas, int64_t step, int64_t vocab, std::span<int32_t> out) override;
  bool samples_by_inverse_cdf() const override { return true; }
  double sample_uniform(int64_t canvas, int64_t step, int64_t position) const override;

  // The per-position primitives the canvas-level calls loop over; any order
  // or split of positions over threads gives identical tokens.
  int32_t uniform_token(int64_t canvas, int64_t step, DrawPurpose purpose, int64_t position, int64_t vocab) const;
  // Inverse CDF over the fp32 probabilities exp(z - max z) (normalized in
  // double) with a 53-bit uniform; never returns a zero-probability token.
  int32_t sample_token(int64_t canvas, int64_t step, int64_t position, const float* logits_row, int64_t vocab) const;

  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
};

class ReplayDraws final : public DrawSource {
 public:
  // Loads every `draw.NNN` tensor (NNN = 000, 001, ... without gaps; I64 or
  // I32) of a golden-style safetensors file. Throws dgemma::Error.
  explicit ReplayDraws(const std::string& path);

  void canvas_init(int64_t canvas, int64_t vocab, std::span<int32_t> out) override;
  void sample(int64_t canvas, int64_t step, const float* processed_logits, int64_t vocab,
              std::span<int32_t> out) override;
  void renoise(int64_t canvas, int64_t step, int64_t vocab, std::span<int32_t> out) override;

  size_t size() const { return draws_.size(); }
  size_t consumed() const { return next_; }
  // Throws unless every draw of the tape was used (a shorter run than the
  // recorded one means the loop stopped early or skipped a draw).
  void expect_exhausted() const;

 private:
  struct Draw {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<int64_t> values;
  };
  // Takes the next draw, checking its shape ([1, L] for randint draws A and
  // C, [L, 1] for multinomial draw B) and value range.
  void take(const char* kind, bool column, int64_t canvas, int64_t step, int64_t vocab, std::span<int32_t> out);

  std::string path_;
  std::vector<Draw> draws_;
  size_t next_ = 0;
};

}  // namespace dgemma

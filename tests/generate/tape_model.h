#pragma once
// A DiffusionModel that replays the decoder logits recorded in a golden
// generate case and checks, on every call, that generate() feeds it exactly
// what the reference fed the real model: the canvas, the self-conditioning
// logits (previous step's raw_logits / temperature, bit-exact), the encoder
// inputs and the positions. Any mismatch throws, naming the tensor.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "model/diffusion_model.h"
#include "golden_case.h"

namespace dgemma::testing {

class TapeModel final : public DiffusionModel {
 public:
  explicit TapeModel(const GoldenCase& golden)
      : golden_(golden),
        vocab_(golden.meta().find("vocab_size")->as_int()),
        canvas_length_(golden.meta().find("canvas_length")->as_int()) {}

  int64_t vocab_size() const override { return vocab_; }
  int64_t canvas_length() const override { return canvas_length_; }
  int64_t cache_length() const override { return cache_length_; }

  void encode(const std::vector<int32_t>& ids) override {
    canvas_ = encodes_++;
    step_ = 0;
    const std::string prefix = "canvas." + std::to_string(canvas_) + ".";
    if (!golden_.has(prefix + "encoder_input_ids"))
      throw Error("TapeModel: unexpected encode #" + std::to_string(canvas_) + " (the reference did not encode)");
    expect_equal(prefix + "encoder_input_ids", golden_.ints32(prefix + "encoder_input_ids"), ids);
    const std::vector<int64_t> positions = golden_.ints(prefix + "encoder_position_ids");
    if (positions.front() != cache_length_)
      throw Error("TapeModel: encode #" + std::to_string(canvas_) + " starts at position " +
                  std::to_string(cache_length_) + ", reference " + std::to_string(positions.front()));
    cache_length_ += int64_t(ids.size());
  }

  void decode(const int32_t* canvas, const float* self_conditioning, float* logits) override {
    if (canvas_ < 0) throw Error("TapeModel: decode before any encode");
    const std::string step = "step." + std::to_string(canvas_) + "." + std::to_string(step_) + ".";
    if (!golden_.has(step + "canvas_in"))
      throw Error("TapeModel: unexpected decode " + step + " (the reference ran fewer steps)");
    expect_equal(step + "canvas_in", golden_.ints32(step + "canvas_in"),
                 std::vector<int32_t>(canvas, canvas + canvas_length_));
    const std::string positions = "canvas." + std::to_string(canvas_) + ".decoder_position_ids";
    if (golden_.ints(positions).front() != cache_length_)
      throw Error("TapeModel: " + step + " decodes at position " + std::to_string(cache_length_) + ", reference " +
                  std::to_string(golden_.ints(positions).front()));

    // Self-conditioning: none on the first step, else the previous step's
    // processed logits = raw_logits / temperature in float32 (golden README).
    if (step_ == 0) {
      if (self_conditioning != nullptr) throw Error("TapeModel: " + step + " got self-conditioning on step 0");
    } else {
      if (self_conditioning == nullptr) throw Error("TapeModel: " + step + " got no self-conditioning");
      const std::string prev = "step." + std::to_string(canvas_) + "." + std::to_string(step_ - 1) + ".";
      const std::vector<float> raw = golden_.floats(prev + "raw_logits");
      const float t = golden_.floats(prev + "temperature").at(0);
      for (size_t i = 0; i < raw.size(); ++i) {
        const float want = raw[i] / t;
        if (std::memcmp(&want, &self_conditioning[i], sizeof(float)) != 0)
          throw Error("TapeModel: " + step + " self-conditioning[" + std::to_string(i) +
                      "] = " + std::to_string(self_conditioning[i]) + ", expected " + prev +
                      "raw_logits/temperature = " + std::to_string(want));
      }
    }
    const std::vector<float> raw = golden_.floats(step + "raw_logits");
    std::copy(raw.begin(), raw.end(), logits);
    ++step_;
    ++decodes_;
  }

  void truncate_cache(int64_t) override { throw Error("TapeModel: truncate_cache is not part of the tape"); }

  int64_t encodes() const { return encodes_; }
  int64_t decodes() const { return decodes_; }

 private:
  static void expect_equal(const std::string& what, const std::vector<int32_t>& want, const std::vector<int32_t>& got) {
    if (want == got) return;
    std::string msg = "TapeModel: " + what + " differs (size " + std::to_string(got.size()) + " vs reference " +
                      std::to_string(want.size()) + ")";
    for (size_t i = 0; i < std::min(want.size(), got.size()); ++i)
      if (want[i] != got[i]) {
        msg += "; first at [" + std::to_string(i) + "]: " + std::to_string(got[i]) + " vs reference " +
               std::to_string(want[i]);
        break;
      }
    throw Error(msg);
  }

  const GoldenCase& golden_;
  int64_t vocab_;
  int64_t canvas_length_;
  int64_t cache_length_ = 0;
  int64_t canvas_ = -1;
  int64_t step_ = 0;
  int64_t encodes_ = 0;
  int64_t decodes_ = 0;
};

}  // namespace dgemma::testing

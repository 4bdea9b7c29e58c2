#include "generate/recorded_self_conditioning.h"

#include <cstring>

#include "dgemma/error.h"
#include "generate/sampler.h"
#include "io/safetensors.h"

namespace dgemma {

RecordedSelfConditioning::RecordedSelfConditioning(DiffusionModel& inner, const std::string& path)
    : inner_(inner), path_(path), file_(SafetensorsFile::open(path)) {}

RecordedSelfConditioning::~RecordedSelfConditioning() = default;

std::vector<float> RecordedSelfConditioning::floats(const std::string& name, size_t expected) const {
  const TensorInfo* info = file_->find(name);
  if (info == nullptr) throw Error(path_ + ": no tensor " + name + " (a recorded run has fewer steps than this one)");
  if (info->dtype != DType::kF32 || size_t(info->numel()) != expected)
    throw Error(path_ + ": " + name + " is not F32 with " + std::to_string(expected) + " elements");
  const TensorView v = file_->view(*info);
  std::vector<float> out(expected);
  std::memcpy(out.data(), v.data, expected * sizeof(float));
  return out;
}

void RecordedSelfConditioning::decode(const int32_t* canvas, const float* self_conditioning, float* logits) {
  if (self_conditioning == nullptr) {
    ++canvas_;
    step_ = 0;
    inner_.decode(canvas, nullptr, logits);
    ++step_;
    return;
  }
  const std::string prev = "step." + std::to_string(canvas_) + "." + std::to_string(step_ - 1) + ".";
  const size_t lv = size_t(canvas_length()) * size_t(vocab_size());
  sc_ = floats(prev + "raw_logits", lv);
  const float temperature = floats(prev + "temperature", 1)[0];
  apply_temperature(sc_, temperature);  // z = logits / T, as generate() does
  inner_.decode(canvas, sc_.data(), logits);
  ++step_;
}

}  // namespace dgemma

#pragma once
// Helpers of the sample op's tests (tests/ops on the CPU, tests/cuda on the
// device): the uniforms tensor of draw B and one run of the op.
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/backend.h"
#include "ops/op.h"

namespace dgemma::testing {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// One double per row as the op takes it: its bit pattern, low word first.
inline Tensor uniforms_tensor(const std::vector<double>& u) {
  Tensor t = Tensor::i32({int64_t(u.size()), 2});
  for (size_t r = 0; r < u.size(); ++r) {
    const uint64_t b = std::bit_cast<uint64_t>(u[r]);
    t.i[2 * r] = int32_t(uint32_t(b));
    t.i[2 * r + 1] = int32_t(uint32_t(b >> 32));
  }
  return t;
}

struct SampleOut {
  Tensor z, argmax, entropy, sample;
};

// Runs the op through an Executor; a device backend may keep the outputs
// there (ops/backend.h), so they are brought to the host.
inline SampleOut run_sample(Backend& b, const Tensor& logits, const Tensor& uniforms, float temperature, int step = 0) {
  SampleOut o;
  OpCall c;
  c.kind = OpKind::kSample;
  c.site = "sample";
  c.pass = Pass::kDecoder;
  c.step = step;
  c.in = {&logits, &uniforms};
  c.out = {&o.z, &o.argmax, &o.entropy, &o.sample};
  c.attrs.temperature = temperature;
  Executor(b).run(c);
  ensure_host({&o.z, &o.argmax, &o.entropy, &o.sample});
  return o;
}

}  // namespace dgemma::testing

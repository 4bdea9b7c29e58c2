// The sampler pass of a denoising step on the model's backend (docs/model.md
// §3.2, §3.3): decode_sample() and the sample op's slots.
#include "model/diffusion_gemma.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "dgemma/error.h"
#include "model/op_site.h"
#include "ops/row_sampling.h"

namespace dgemma {

// A decoder pass and the per-row sampler pass of generate() as the sample op
// (docs/model.md §3.2); z stays in processed_ as the next step's self-conditioning
// input (docs/model.md §3.3).
void DiffusionGemma::decode_sample(const int32_t* canvas, bool use_self_conditioning, float temperature,
                                   const double* uniforms, RowSamples& out) {
  const int64_t L = config_.canvas_length;
  if (use_self_conditioning && !processed_valid_)
    throw Error(
        "decode_sample: self-conditioning asked for, but the previous pass was not a decode_sample() of this "
        "cache (encode, decode, truncate_cache or swap_cache came in between)");
  processed_valid_ = false;  // processed_ is overwritten below; valid again once the op succeeded
  const Tensor& logits = decode_logits(canvas, L, use_self_conditioning ? &processed_ : nullptr);
  const int step = decoder_step_++;
  const SampleSlots slots = sample_rows(logits, processed_, temperature, uniforms, step, "sample");
  // O(canvas) values come to the host; z stays where the op ran (on a device
  // for the next step's soft embedding, docs/model.md §3.3).
  ensure_host({slots.argmax, slots.entropy, slots.sample});
  sample_rows_out(slots, processed_, step, out);
  processed_valid_ = true;
}

DiffusionGemma::SampleSlots DiffusionGemma::sample_rows(const Tensor& logits, Tensor& z, float temperature,
                                                        const double* uniforms, int step, const std::string& slots) {
  const int64_t n = logits.dim(0);
  SampleSlots s{&workspace_.slot(slots + ".uniforms"), &workspace_.slot(slots + ".argmax"),
                &workspace_.slot(slots + ".entropy"), &workspace_.slot(slots + ".sample")};
  Tensor& u = *s.uniforms;
  u.dtype = DType::kI32;
  u.resize({uniforms ? n : 0, 2});
  for (int64_t r = 0; uniforms && r < n; ++r) {  // the double's bit pattern, low word first
    const uint64_t bits = std::bit_cast<uint64_t>(uniforms[r]);
    u.i[size_t(2 * r)] = int32_t(uint32_t(bits));
    u.i[size_t(2 * r + 1)] = int32_t(uint32_t(bits >> 32));
  }
  u.host_written();
  OpCall c;
  c.kind = OpKind::kSample;
  c.site = "sample";
  c.layer = -1;
  c.pass = Pass::kDecoder;
  c.step = step;
  c.in = {&logits, &u};
  c.out = {&z, s.argmax, s.entropy, s.sample};
  c.attrs.temperature = temperature;
  exec_.run(c);
  return s;
}

void DiffusionGemma::sample_rows_out(const SampleSlots& s, Tensor& z, int step, RowSamples& out) const {
  // A device marks the rows it cannot sample; the CPU op has thrown already.
  for (const int32_t a : s.argmax->i)
    if (a < 0) {
      z.ensure_host();
      throw_marked_row(s.argmax->i, z.f.data(), config_.vocab_size, sample_op_where("sample", step));
    }
  out.argmax.assign(s.argmax->i.begin(), s.argmax->i.end());
  out.entropy.assign(s.entropy->f.begin(), s.entropy->f.end());
  out.sample.assign(s.sample->i.begin(), s.sample->i.end());
}

void DiffusionGemma::processed_logits(float* out) {
  if (!processed_valid_) throw Error("processed_logits: no decode_sample() since the last change of the cache");
  processed_.ensure_host();
  std::memcpy(out, processed_.f.data(), processed_.f.size() * sizeof(float));
}

}  // namespace dgemma

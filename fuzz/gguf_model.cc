// libFuzzer target: the input is a whole GGUF file image; what parses as a
// container goes through the DiffusionGemma config reader and the tokenizer
// factory (docs/formats.md §5.3, §5.4). Any exception other than
// dgemma::Error and any sanitizer report is a bug. Seeds: the gguf_header
// corpus (fuzz/corpus/gguf_header/).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "checkpoint/gguf_config.h"
#include "dgemma/error.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

// The file's tokenizer keys as arrays (what the CLI hands the factory).
dgemma::TokenizerArrays arrays_of(const dgemma::GgufKeys& k) {
  dgemma::TokenizerArrays a;
  a.source = k.source();
  a.model = std::string(k.string("tokenizer.ggml.model"));
  for (std::string_view t : k.strings("tokenizer.ggml.tokens")) a.tokens.emplace_back(t);
  if (k.has("tokenizer.ggml.token_type"))
    for (int64_t t : k.integers("tokenizer.ggml.token_type")) a.types.push_back(int32_t(t));
  if (k.has("tokenizer.ggml.merges"))
    for (std::string_view m : k.strings("tokenizer.ggml.merges")) a.merges.emplace_back(m);
  if (k.has("tokenizer.ggml.bos_token_id")) a.bos_id = int32_t(k.integer("tokenizer.ggml.bos_token_id"));
  a.add_bos = a.bos_id >= 0;
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dgemma::GgufHeader h;
  try {
    h = dgemma::parse_gguf(data, size, "fuzz.gguf");
  } catch (const dgemma::Error&) {
    return 0;
  }
  const dgemma::GgufKeys keys(&h.kvs, "fuzz.gguf");
  try {
    std::vector<float> freqs;
    bool have_freqs = false;
    for (const auto& t : h.tensors) {
      if (t.name != "rope_freqs.weight" || t.type != dgemma::GgmlType::kF32 || t.ne.size() != 1) continue;
      freqs.resize(size_t(t.ne[0]));
      std::memcpy(freqs.data(), data + h.data_offset + t.offset, freqs.size() * sizeof(float));
      have_freqs = true;
    }
    dgemma::gguf_model_config(keys, h.tensors, have_freqs ? &freqs : nullptr);
  } catch (const dgemma::Error&) {
  }
  try {
    dgemma::gguf_sampler_defaults(keys);
  } catch (const dgemma::Error&) {
  }
  try {
    const dgemma::Tokenizer tok = dgemma::Tokenizer::from_arrays(arrays_of(keys));
    const std::vector<int32_t> ids = tok.encode("a b <bos>", true);
    tok.decode(ids);
  } catch (const dgemma::Error&) {
  }
  return 0;
}

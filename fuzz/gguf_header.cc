// libFuzzer target: the input is a whole GGUF file image, fed to the header
// parser (docs/formats.md §5.1). Any exception other than dgemma::Error, any
// sanitizer report and any broken invariant below is a bug. Seeds:
// fuzz/corpus/gguf_header/, written by tests/io/gguf_corpus_test.cc.
#include <cstddef>
#include <cstdint>

#include "dgemma/error.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const dgemma::GgufHeader h = dgemma::parse_gguf(data, size, "fuzz.gguf");
    // What passed must describe keys and tensors that lie inside the input.
    if (h.data_offset > size) __builtin_trap();
    if (h.alignment == 0 || (h.alignment & (h.alignment - 1)) != 0) __builtin_trap();
    if (!h.tensors.empty() && h.data_offset % h.alignment != 0) __builtin_trap();
    for (const auto& kv : h.kvs) {
      if (kv.data < data || kv.nbytes > size || kv.data + kv.nbytes > data + size) __builtin_trap();
      if (kv.elem_type == dgemma::GgufValueType::kArray) __builtin_trap();
    }
    for (const auto& t : h.tensors) {
      if (t.ne.empty() || t.ne.size() > 4 || t.name.empty() || t.name.size() > 63) __builtin_trap();
      const dgemma::GgmlTypeTraits& tr = dgemma::ggml_traits(t.type);
      uint64_t rows = 1;
      for (size_t i = 0; i < t.ne.size(); ++i) {
        if (t.ne[i] < 1) __builtin_trap();
        if (i > 0 && __builtin_mul_overflow(rows, uint64_t(t.ne[i]), &rows)) __builtin_trap();
      }
      if (t.ne[0] % tr.block_elems != 0) __builtin_trap();
      uint64_t nbytes = 0;
      if (__builtin_mul_overflow(rows, dgemma::ggml_row_bytes(t.type, t.ne[0]), &nbytes) || nbytes != t.nbytes)
        __builtin_trap();
      if (t.offset % h.alignment != 0) __builtin_trap();
      if (t.offset > size - h.data_offset || t.nbytes > size - h.data_offset - t.offset) __builtin_trap();
    }
  } catch (const dgemma::Error&) {
  }
  return 0;
}

#pragma once
// GGUF files of a DiffusionGemma config in the published layout
// (docs/formats.md §5.3), for tests: the F32 file of a checkpoint folder's
// weights, and a sparse full-size fake with the published Q4_K_M types whose
// data are file holes.
#include <string>

#include "checkpoint/config.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"

namespace dgemma {

// The model keys of `c` as the published files spell them: architecture,
// dimensions, per-layer KV heads and sliding pattern, RoPE, canvas, and
// `file_type` (llama.cpp's file-type id). Also a placeholder vocabulary
// (`tokenizer.ggml.*`: vocab_size pieces "<tN>", no merges) unless
// `with_tokenizer` is false and the caller adds the real one.
void add_gguf_model_keys(GgufStreamWriter& w, const ModelConfig& c, uint32_t file_type, bool with_tokenizer = true);

// Writes every tensor of `c` from `source` (canonical names or tied aliases,
// F32/BF16/F16), converted to F32, plus rope_freqs.weight, to `path`.
void write_gguf_f32(const ModelConfig& c, const TensorStore& source, const std::string& path);

// Writes the tensor list of `c` with the types of the published Q4_K_M file
// (docs/formats.md §5.3; the layer lists are those of the 30-layer model)
// as holes: no disk blocks, reads as zeros. rope_freqs.weight is written.
void write_sparse_gguf_q4_k_m(const ModelConfig& c, const std::string& path);

}  // namespace dgemma

#pragma once
// `dgemma quantize IN OUT.gguf --format q4_k_m|q8_0|…`: any checkpoint folder
// this engine reads (BF16/F16/F32, or already quantized: its weights are
// dequantized first) streamed into one GGUF file in the layout of the
// published DiffusionGemma GGUF files (docs/formats.md §5.3, §5.5): their
// tensor names and dimension order, keys and key value types, the
// per-tensor types llama.cpp's quantizer picks for the file type
// (quantize/gguf_type_rules.h), rope_freqs.weight, and the tokenizer arrays.
// One chunk of rows is in memory at a time.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quantize/gguf_type_rules.h"

namespace dgemma {

// The tokenizer keys of the file (docs/formats.md §5.4), as plain data: the
// tools layer fills it from the checkpoint's tokenizer files, since this
// layer does not read tokenizers.
struct GgufTokenizerData {
  std::string model = "gemma4";     // tokenizer.ggml.model
  std::vector<std::string> tokens;  // id -> piece
  std::vector<float> scores;        // id -> score (empty: all 0)
  std::vector<int32_t>
      token_types;  // id -> llama.cpp token type (1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte)
  std::vector<std::string> merges;                                                   // "left right", in rank order
  int32_t bos_id = -1, eos_id = -1, unknown_id = -1, padding_id = -1, mask_id = -1;  // -1: key not written
  bool add_bos = true, add_space_prefix = false;
  std::string chat_template;  // empty: key not written
};

struct GgufExportOptions {
  quant::GgufFtype ftype = quant::GgufFtype::kQ4_K_M;
  int threads = 0;              // quantizer threads (0: every hardware thread)
  std::string name;             // general.name ("" : "DiffusionGemma")
  GgufTokenizerData tokenizer;  // required: the vocabulary size comes from it
  // Called after each output tensor (input bytes processed so far, total).
  std::function<void(uint64_t done, uint64_t total, const std::string& tensor)> progress;
};

struct GgufExportReport {
  std::string out_file;
  uint64_t input_bytes = 0, output_bytes = 0;
  int quantized = 0, plain = 0;  // output tensors in block types / F32, F16, BF16
  int dropped = 0;               // stored tensors not written (tied copies, vision)
  // Of those, the vision tower's and embed_vision's (docs/model.md §7.1): a
  // GGUF written here has no tower, so they are dropped.
  int vision_dropped = 0;
  uint64_t vision_bytes = 0;
  // Relative RMS error of the quantized tensors' values over all of them:
  // sqrt(Σ (x − q)² / Σ x²).
  double rel_rms = 0;
};

// Writes `out_file` (a new GGUF file, written under a temporary name and
// renamed into place) from the checkpoint folder `in_dir`. Throws
// dgemma::Error naming the tensor or key at fault.
GgufExportReport export_gguf(const std::string& in_dir, const std::string& out_file, const GgufExportOptions& options);

}  // namespace dgemma

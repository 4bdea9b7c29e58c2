#pragma once
// `dgemma quantize … OUT.gguf`: the tokenizer keys of the GGUF file
// (docs/formats.md §5.4) from the checkpoint folder's tokenizer.json, its
// chat template (chat_template.jinja or tokenizer_config.json's
// "chat_template") and config (special ids).
#include <string>

#include "checkpoint/config.h"
#include "quantize/export_gguf.h"

namespace dgemma::cli {

// Token types as llama.cpp's converter gives them: special added tokens
// control, other added tokens and the chat format's visible markers
// user-defined, `<0xNN>` pieces byte, the unknown token unknown, the rest
// normal; added tokens past the model's vocabulary are left out. Merges as
// "left right" in rank order. Throws dgemma::Error naming
// the file and entry.
GgufTokenizerData gguf_tokenizer_data(const std::string& dir, const ModelConfig& config);

}  // namespace dgemma::cli

#pragma once
// Where `run` and `chat` get their model and tokenizer: -m DIR, or the
// embedded default model (src/model/default_model.h: random weights,
// generated into the cache folder on first use).
#include <string>

#include "io/gguf.h"
#include "model_flags.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::cli {

// The checkpoint for `mf`: mf.model_dir when given (a folder or a GGUF
// file), else the default model's folder (created if needed; a note goes to
// stderr unless `quiet`).
std::string resolve_model_dir(const ModelFlags& mf, bool quiet);

// --tokenizer FILE when given, else DIR/tokenizer.json (which must exist).
std::string resolve_tokenizer_path(const std::string& flag, const std::string& model_dir);

// The tokenizer of a run: --tokenizer FILE when given; else a GGUF model's
// own (its tokenizer.ggml.* keys, docs/formats.md §5.4); else
// DIR/tokenizer.json.
Tokenizer load_model_tokenizer(const std::string& flag, const std::string& model);

// The arrays of a GGUF file's tokenizer keys (docs/formats.md §5.4); errors
// name the file and the key.
TokenizerArrays gguf_tokenizer_arrays(const GgufKeys& keys);

// Help text shared by run/chat about the default model.
extern const char* const kDefaultModelHelp;

}  // namespace dgemma::cli

#pragma once
// Where `run` and `chat` get their model and tokenizer: -m DIR, or the
// embedded default model (src/model/default_model.h: random weights,
// generated into the cache folder on first use).
#include <string>

#include "model_flags.h"

namespace dgemma::cli {

// The checkpoint folder for `mf`: mf.model_dir when given, else the default
// model (created if needed; a note goes to stderr unless `quiet`).
std::string resolve_model_dir(const ModelFlags& mf, bool quiet);

// --tokenizer FILE when given, else DIR/tokenizer.json (which must exist).
std::string resolve_tokenizer_path(const std::string& flag, const std::string& model_dir);

// Help text shared by run/chat about the default model.
extern const char* const kDefaultModelHelp;

}  // namespace dgemma::cli

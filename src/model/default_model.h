#pragma once
// The embedded default model: what `dgemma run` / `dgemma chat` use when no
// -m is given, so that a fresh clone runs end to end with nothing downloaded.
//
// It is the `tiny-B` shape of docs/model.md §5.2 (real 262,144-token
// vocabulary, hidden 96, layers S,S,S,F, 4 heads, kv 2/1, head dims 16/32,
// window 8, 8 experts top-3) with canvas_length 16, 8 denoising steps, an
// entropy bound of 5 nats (so that random logits accept a few positions per
// step) and RANDOM weights: it exercises the real tokenizer, chat template, EOS ids and
// the whole generation loop, but its output is gibberish. Point -m at the real
// google/diffusiongemma-26B-A4B-it folder for meaningful text.
//
// Nothing is shipped: the checkpoint (bf16, ~50 MB) is generated
// deterministically on first use from a fixed seed, together with a
// Gemma-4-style tokenizer.json derived from the Gemma 3 tokenizer installed
// with the binary (default_tokenizer_source()), into a cache folder.
// The folder is written under a temporary name and renamed into place, so
// concurrent first uses and interrupted writes never leave a partial model.
#include <string>

namespace dgemma {

// Bump when the generated content changes, so old caches are not reused.
inline constexpr const char* kDefaultModelName = "default-model-v2";

// The dgemma cache root: $DGEMMA_CACHE if set and non-empty, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/dgemma. Throws when none of these is set.
std::string dgemma_cache_root();

// <cache root>/default-model-v2.
std::string default_model_dir();

// The Gemma 3 tokenizer.json the default tokenizer is derived from: the
// installed data file (core/data_dir.h data_file("tokenizer.json"); the
// build and `cmake --install` copy tests/data/tokenizer/tokenizer.json there).
std::string default_tokenizer_source();

struct DefaultModel {
  std::string dir;       // checkpoint folder (config.json, generation_config.json, tokenizer.json, model.safetensors)
  bool created = false;  // true when this call generated it
  double seconds = 0;    // time spent creating it (0 when it existed)
};

// Returns the default model folder, generating it first if it does not exist.
// Throws dgemma::Error (naming the path) when it cannot be created.
DefaultModel ensure_default_model();

// Generates the default model into `dir` (which must not exist yet), reading
// the Gemma 3 tokenizer from `gemma3_tokenizer_json`. Deterministic: the same
// inputs give byte-identical files.
void write_default_model(const std::string& dir, const std::string& gemma3_tokenizer_json);

// Turns a Gemma 3 tokenizer.json into a Gemma-4-style one (docs/model.md §3.6): the
// Gemma 4 control tokens (<|turn>, <turn|>, <|channel>, <channel|>, <|think|>,
// tool tokens, <|"|>) replace the Gemma 3 tokens at their Gemma 4 ids as
// special added tokens, and <image_soft_token> (id 262144, absent in Gemma 4)
// is dropped so the vocabulary is exactly 262,144. Ordinary pieces keep their
// ids, so the chat template produces the real Gemma 4 prompt ids (the
// Portugal golden of docs/model.md §3.6). `source` names the input in errors.
std::string gemma4_style_tokenizer_json(const std::string& gemma3_json, const std::string& source);

}  // namespace dgemma

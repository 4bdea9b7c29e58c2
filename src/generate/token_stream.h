#pragma once
// From committed canvases to what a user sees. generate() keeps full canvases
// (docs/model.md §3.4: the reference does not trim to max_new_tokens, and the EOS
// canvas is pad-filled after its first EOS); streaming front ends instead show
// the tokens before the first EOS, at most max_tokens of them, canvas by
// canvas as they commit. TokenStream does that trimming; TextStream turns the
// growing token list into text that never has to be taken back.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dgemma {

enum class StopReason {
  kNone,    // still running (or cancelled)
  kEos,     // an EOS id was committed
  kLength,  // max_tokens reached, or every canvas of max_new_tokens committed
};
const char* stop_reason_name(StopReason reason);

class TokenStream {
 public:
  // max_tokens < 0: no limit besides the canvases generated.
  TokenStream(std::vector<int32_t> eos_token_ids, int64_t max_tokens);

  // Takes one committed canvas (CanvasEvent::argmax or ::committed) and
  // returns the tokens of it that become visible: those before the first EOS,
  // within the max_tokens budget. Nothing is visible once finished().
  std::span<const int32_t> push(std::span<const int32_t> canvas);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  bool finished() const { return reason_ != StopReason::kNone; }
  // kNone until finished; call finish() after generation to turn a run that
  // used all its canvases into kLength.
  StopReason stop_reason() const { return reason_; }
  void finish();

 private:
  std::vector<int32_t> eos_;
  int64_t max_tokens_;
  std::vector<int32_t> tokens_;
  StopReason reason_ = StopReason::kNone;
};

// Incremental detokenization. Decoding token by token can split a UTF-8
// character across byte-fallback tokens (<0xE4><0xBD><0xA0>), which decodes
// to U+FFFD until its last byte arrives; so the whole list is decoded each
// time and trailing U+FFFD characters are held back until more tokens (or
// flush()) settle them.
class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, bool skip_special) : tokenizer_(&tokenizer), skip_special_(skip_special) {}

  // Appends ids; returns the newly settled text.
  std::string push(std::span<const int32_t> ids);
  // Returns whatever is still held back (call once at the end).
  std::string flush();
  // The full text of every id pushed so far.
  std::string text() const;
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t emitted_ = 0;  // bytes of text() already returned
};

}  // namespace dgemma

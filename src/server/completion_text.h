#pragma once
// The text a completion shows, canvas by canvas (docs/model.md §3.4: whole canvases
// are generated; the API layer trims). On top of TokenStream (first EOS,
// max_tokens) and TextStream (UTF-8 settling) it applies OpenAI stop strings:
// the text ends before the first occurrence of any of them, also when one
// straddles two canvases, and text that could be the start of a stop string
// is held back until the next canvas settles it.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "generate/token_stream.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::server {

enum class FinishReason { kNone, kStop, kLength, kToolCalls };
// "stop", "length", "tool_calls" (kNone: "null" is the caller's business; returns "").
const char* finish_reason_name(FinishReason reason);

class CompletionText {
 public:
  // max_tokens >= 1. Special tokens (<|channel>, <pad>, ...) are left out of
  // the text, as OpenAI-compatible servers do, except those in `kept_special`:
  // the tool-format markers, which the tool-call parser has to see
  // (docs/server.md §7).
  CompletionText(const Tokenizer& tokenizer, std::vector<int32_t> eos_token_ids, int64_t max_tokens,
                 std::vector<std::string> stop, std::vector<int32_t> kept_special = {});

  // One committed canvas (CanvasEvent::committed); returns the newly visible text.
  std::string push(std::span<const int32_t> canvas);
  // Generation ended without EOS/stop (every canvas used, or cancelled):
  // returns whatever was held back; the reason becomes kLength.
  std::string finish();

  // No more text will come (EOS, max_tokens or a stop string): generation can end.
  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason reason() const { return reason_; }
  // Generated tokens the answer covers: before the EOS, at most max_tokens,
  // up to the token that completed a stop string.
  int64_t completion_tokens() const;
  // Everything returned so far.
  const std::string& text() const { return emitted_text_; }

  // The provisional text of a canvas being denoised (its current argmax),
  // cut at the first EOS and at the tokens max_tokens still allows; stop
  // strings are not applied to drafts.
  std::string draft(std::span<const int32_t> argmax) const;

 private:
  // Cuts full_ at the earliest stop string found in the unsearched part.
  bool apply_stop();
  std::string emit(size_t upto);
  size_t held_back() const;  // bytes at the end of full_ that may begin a stop string

  const Tokenizer& tokenizer_;
  std::vector<int32_t> eos_;
  int64_t max_tokens_;
  std::vector<std::string> stop_;
  std::vector<int32_t> kept_special_;
  size_t max_stop_ = 0;
  // The visible tokens that reach the text (specials not kept are dropped),
  // and for each of them how many visible tokens it stands at the end of.
  std::vector<int64_t> source_count_;
  TokenStream tokens_;
  TextStream text_;
  std::string full_;     // settled text so far (cut at a stop string once found)
  size_t searched_ = 0;  // bytes of full_ searched for stop strings
  size_t emitted_ = 0;   // bytes of full_ returned
  std::string emitted_text_;
  int64_t stop_tokens_ = -1;  // completion_tokens once a stop string matched
  FinishReason reason_ = FinishReason::kNone;
};

}  // namespace dgemma::server

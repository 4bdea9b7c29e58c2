#pragma once
// A multi-turn conversation over one model whose KV cache is reused between
// turns (docs/model.md §3.6 "Multi-turn with cache reuse": pass only uncached ids).
//
// The session keeps two id lists:
//  * history: the conversation as the model should read it next: the first
//    prompt from the chat template, then per turn the reply as generated (up
//    to, not including, its EOS; at most the shown tokens), the template's
//    end-of-turn ("<turn|>\n"), and the next user turn with its generation
//    prompt (the template's text after a closed model turn);
//  * cached: the ids whose keys/values are in the model cache. generate()
//    encodes the prompt and every committed canvas except the last one (the
//    EOS canvas, or the one that reached max_new_tokens, is never encoded), so
//    the last canvas of a reply is always re-read with the next turn.
// Each turn encodes history[p:], where p is the longest common prefix of the
// two lists; the cache is truncated to p when it holds more (e.g. a reply
// trimmed by -n inside an encoded canvas). Sliding-window layers can only be
// truncated while they still hold the rows the window needs; otherwise the
// cache is rebuilt from scratch (still exact, only slower).
//
// Context limit (set_context_limit): when the history plus the positions a
// reply needs would exceed the context size, begin_turn() drops the oldest
// turns (user message and reply) until it fits, re-rendering the first kept
// turn as the conversation's first (with the system prompt, which is always
// kept). TurnInput::dropped_turns says how many went; the cache then keeps
// only the common prefix (the system turn) and re-encodes the rest.
//
// Images (set_image_tokens, docs/model.md §7.6): a user turn may carry
// pictures, rendered before its text and expanded to their soft-token runs.
// Placeholder ids do not tell two pictures apart, so the cached prefix ends
// before the first run whose picture is not the one the cache encoded there;
// TurnInput::images are the pictures of the runs in new_ids, in order.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/vision_input.h"
#include "model/diffusion_model.h"
#include "generate/generate.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/image_placeholders.h"
#include "tokenizer/tokenizer.h"

namespace dgemma {

class ChatSession {
 public:
  ChatSession(DiffusionModel& model, const Tokenizer& tokenizer, ChatTemplateKind kind, std::string system,
              bool enable_thinking);

  struct TurnInput {
    std::vector<int32_t> new_ids;     // pass to generate() as the prompt
    int64_t reused = 0;               // cached positions kept
    bool cache_reset = false;         // the cache had to be rebuilt from position 0
    int64_t dropped_turns = 0;        // oldest turns dropped to fit the context size
    std::vector<VisionInput> images;  // pass to generate(): the pictures of new_ids' placeholder runs
  };
  // The model's image placeholder, begin and end ids; needed before a turn
  // with images.
  void set_image_tokens(const ImageTokenIds& tokens) { image_tokens_ = tokens; }
  // Positions the conversation may use (0: no limit) and positions to keep
  // free for each reply (whole canvases for max_new_tokens).
  void set_context_limit(int64_t context_size, int64_t reply_positions);
  // Adds a user turn and prepares the cache; call generate() with new_ids next.
  // Throws dgemma::Error, leaving the session as it was, when the turn does
  // not fit in the context size even without any earlier turn.
  // `images`: the turn's pictures, shown to the model before its text.
  TurnInput begin_turn(const std::string& user_text, std::vector<VisionInput> images = {});
  // Records the reply of the turn begun last: `result` of that generate()
  // call and the visible reply tokens (before the EOS, within -n).
  void end_turn(const GenerationResult& result, std::span<const int32_t> reply);
  // Forgets the conversation and empties the cache.
  void reset();

  const std::vector<int32_t>& history() const { return history_; }
  const std::vector<int32_t>& cached() const { return cached_; }
  // Turns in the history (kept ones, including the one in progress).
  size_t turns() const { return turns_.size(); }

 private:
  // A picture of the conversation; `serial` tells it apart from every other.
  struct Picture {
    int64_t serial = 0;
    std::shared_ptr<const VisionInput> input;
  };
  struct Turn {
    std::string user;                   // the user message
    std::vector<Picture> pictures;      // shown before the text
    std::vector<int32_t> continuation;  // its ids after a closed model turn
    std::vector<int32_t> reply;         // reply + closing ids (after end_turn)
  };
  std::vector<ChatMessage> user_message(const Turn& turn) const;
  std::vector<int32_t> expanded(std::vector<int32_t> ids, const Turn& turn) const;
  std::vector<int32_t> first_turn_ids(const Turn& turn) const;
  std::vector<int32_t> continuation_ids(const Turn& turn) const;
  // The pictures of the kept turns, in the order of their runs in history_.
  std::vector<Picture> history_pictures() const;
  // The history made of turns_[first..] followed by `next` (a new turn).
  std::vector<int32_t> history_from(size_t first, const Turn& next) const;

  DiffusionModel& model_;
  const Tokenizer& tokenizer_;
  ChatTemplateKind kind_;
  std::string system_;
  bool thinking_;
  std::vector<int32_t> closing_ids_;  // end of a model turn, e.g. "<turn|>\n"
  std::vector<int32_t> history_;
  std::vector<int32_t> cached_;
  std::vector<int32_t> pending_;  // new_ids of the turn in progress
  std::vector<Turn> turns_;
  ImageTokenIds image_tokens_;
  int64_t next_serial_ = 0;
  std::vector<int64_t> cached_pictures_;   // serials of the placeholder runs in cached_, in order
  std::vector<int64_t> pending_pictures_;  // the same for pending_
  int64_t context_size_ = 0;
  int64_t reply_positions_ = 0;
};

}  // namespace dgemma

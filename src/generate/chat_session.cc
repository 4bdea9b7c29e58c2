#include "generate/chat_session.h"

#include <algorithm>

#include "dgemma/error.h"

namespace dgemma {
namespace {

// Placeholder contents used to cut template renderings apart; the Gemma
// templates copy (trimmed) content verbatim, so the pieces around them are
// exactly the template's own text.
constexpr const char* kUserMark = "U";
constexpr const char* kModelMark = "Q";

std::vector<ChatMessage> closed_exchange() { return {{"user", kUserMark, {}}, {"assistant", kModelMark, {}}}; }

}  // namespace

ChatSession::ChatSession(DiffusionModel& model, const Tokenizer& tokenizer, ChatTemplateKind kind, std::string system,
                         bool enable_thinking)
    : model_(model), tokenizer_(tokenizer), kind_(kind), system_(std::move(system)), thinking_(enable_thinking) {
  // The end of a closed model turn: what the template writes after the
  // content of an assistant message ("<turn|>\n" for Gemma 4).
  const std::string closed = render_chat(tokenizer_, closed_exchange(), false, thinking_, kind_);
  const size_t mark = closed.rfind(kModelMark);
  if (mark == std::string::npos) throw Error("chat: the chat template dropped the assistant message");
  closing_ids_ = tokenizer_.encode(closed.substr(mark + 1), false);
  if (model_.cache_length() != 0) model_.truncate_cache(0);
}

ChatSession::TurnInput ChatSession::begin_turn(const std::string& user_text) {
  if (history_.empty()) {
    std::vector<ChatMessage> messages;
    if (!system_.empty()) messages.push_back({"system", system_, {}});
    messages.push_back({"user", user_text, {}});
    history_ = encode_chat(tokenizer_, messages, true, thinking_, kind_);
  } else {
    // The template's text for one more user turn and the generation prompt,
    // as the difference of two renderings.
    std::vector<ChatMessage> messages = closed_exchange();
    const std::string before = render_chat(tokenizer_, messages, false, thinking_, kind_);
    messages.push_back({"user", user_text, {}});
    const std::string after = render_chat(tokenizer_, messages, true, thinking_, kind_);
    if (after.compare(0, before.size(), before) != 0)
      throw Error("chat: the chat template does not render a conversation as a prefix of its continuation");
    const std::vector<int32_t> turn = tokenizer_.encode(after.substr(before.size()), false);
    history_.insert(history_.end(), turn.begin(), turn.end());
  }

  TurnInput in;
  if (model_.cache_length() != int64_t(cached_.size())) {  // someone else used the model: start over
    model_.truncate_cache(0);
    cached_.clear();
    in.cache_reset = true;
  }
  const auto [mismatch, unused] = std::mismatch(cached_.begin(), cached_.end(), history_.begin(), history_.end());
  int64_t keep = int64_t(mismatch - cached_.begin());
  if (keep < int64_t(cached_.size())) {
    try {
      model_.truncate_cache(keep);
    } catch (const Error&) {
      // A sliding layer already evicted rows the shorter prefix needs.
      model_.truncate_cache(0);
      keep = 0;
      in.cache_reset = true;
    }
    cached_.resize(size_t(keep));
  }
  in.reused = keep;
  in.new_ids.assign(history_.begin() + keep, history_.end());
  pending_ = in.new_ids;
  return in;
}

void ChatSession::end_turn(const GenerationResult& result, std::span<const int32_t> reply) {
  // generate() encoded the prompt and the leading committed canvases.
  cached_.insert(cached_.end(), pending_.begin(), pending_.end());
  const int64_t encoded = model_.cache_length() - int64_t(cached_.size());
  const std::span<const int32_t> generated = result.generated();
  if (encoded < 0 || encoded > int64_t(generated.size()))
    throw Error("chat: the model cache holds " + std::to_string(model_.cache_length()) +
                " positions, which does not match the conversation");
  cached_.insert(cached_.end(), generated.begin(), generated.begin() + encoded);
  pending_.clear();

  history_.insert(history_.end(), reply.begin(), reply.end());
  history_.insert(history_.end(), closing_ids_.begin(), closing_ids_.end());
}

void ChatSession::reset() {
  model_.truncate_cache(0);
  history_.clear();
  cached_.clear();
  pending_.clear();
}

}  // namespace dgemma

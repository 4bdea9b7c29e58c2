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

// Where each maximal run of `image` ids starts.
std::vector<int64_t> run_starts(const std::vector<int32_t>& ids, int32_t image) {
  std::vector<int64_t> starts;
  if (image < 0) return starts;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == image && (i == 0 || ids[i - 1] != image)) starts.push_back(int64_t(i));
  return starts;
}

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

void ChatSession::set_context_limit(int64_t context_size, int64_t reply_positions) {
  context_size_ = context_size;
  reply_positions_ = reply_positions;
}

std::vector<ChatMessage> ChatSession::user_message(const Turn& turn) const {
  if (turn.pictures.empty()) return {{"user", turn.user, {}}};
  std::vector<ChatContentPart> parts(turn.pictures.size(), ChatContentPart{"image", "", ""});
  parts.push_back({"text", turn.user, ""});
  return {{"user", turn.user, std::move(parts)}};
}

std::vector<int32_t> ChatSession::expanded(std::vector<int32_t> ids, const Turn& turn) const {
  if (turn.pictures.empty()) return ids;
  std::vector<int64_t> counts;
  for (const Picture& p : turn.pictures) counts.push_back(p.input->n_soft);
  return expand_image_placeholders(ids, counts, image_tokens_);
}

std::vector<int32_t> ChatSession::first_turn_ids(const Turn& turn) const {
  std::vector<ChatMessage> messages;
  if (!system_.empty()) messages.push_back({"system", system_, {}});
  for (ChatMessage& m : user_message(turn)) messages.push_back(std::move(m));
  return expanded(encode_chat(tokenizer_, messages, true, thinking_, kind_), turn);
}

std::vector<int32_t> ChatSession::continuation_ids(const Turn& turn) const {
  // The template's text for one more user turn and the generation prompt,
  // as the difference of two renderings.
  std::vector<ChatMessage> messages = closed_exchange();
  const std::string before = render_chat(tokenizer_, messages, false, thinking_, kind_);
  for (ChatMessage& m : user_message(turn)) messages.push_back(std::move(m));
  const std::string after = render_chat(tokenizer_, messages, true, thinking_, kind_);
  if (after.compare(0, before.size(), before) != 0)
    throw Error("chat: the chat template does not render a conversation as a prefix of its continuation");
  return expanded(tokenizer_.encode(after.substr(before.size()), false), turn);
}

std::vector<int32_t> ChatSession::history_from(size_t first, const Turn& next) const {
  std::vector<int32_t> h;
  for (size_t k = first; k < turns_.size(); ++k) {
    const std::vector<int32_t> head = k == first ? first_turn_ids(turns_[k]) : turns_[k].continuation;
    h.insert(h.end(), head.begin(), head.end());
    h.insert(h.end(), turns_[k].reply.begin(), turns_[k].reply.end());
  }
  const std::vector<int32_t> head = first == turns_.size() ? first_turn_ids(next) : next.continuation;
  h.insert(h.end(), head.begin(), head.end());
  return h;
}

std::vector<ChatSession::Picture> ChatSession::history_pictures() const {
  std::vector<Picture> out;
  for (const Turn& t : turns_) out.insert(out.end(), t.pictures.begin(), t.pictures.end());
  return out;
}

ChatSession::TurnInput ChatSession::begin_turn(const std::string& user_text, std::vector<VisionInput> images) {
  if (!images.empty() && image_tokens_.image < 0)
    throw Error("chat: this model takes no images (it has no image placeholder id)");
  Turn next{user_text, {}, {}, {}};
  for (VisionInput& image : images)
    next.pictures.push_back({next_serial_++, std::make_shared<const VisionInput>(std::move(image))});
  next.continuation = continuation_ids(next);
  std::vector<int32_t> history;
  size_t first = 0;
  if (turns_.empty()) {
    history = first_turn_ids(next);
  } else {
    history = history_;
    history.insert(history.end(), next.continuation.begin(), next.continuation.end());
  }
  const auto fits = [&](const std::vector<int32_t>& h) {
    return context_size_ <= 0 || int64_t(h.size()) + reply_positions_ <= context_size_;
  };
  while (!fits(history) && first < turns_.size()) history = history_from(++first, next);
  if (!fits(history))
    throw Error("chat: this message needs " + std::to_string(history.size()) + " prompt tokens plus " +
                std::to_string(reply_positions_) + " positions for the reply (whole canvases for -n), more than " +
                "the context size " + std::to_string(context_size_) + " (-c/--ctx-size) even without earlier turns");
  turns_.erase(turns_.begin(), turns_.begin() + std::ptrdiff_t(first));
  turns_.push_back(std::move(next));
  history_ = std::move(history);

  TurnInput in;
  if (model_.cache_length() != int64_t(cached_.size())) {  // someone else used the model: start over
    model_.truncate_cache(0);
    cached_.clear();
    in.cache_reset = true;
  }
  const auto [mismatch, unused] = std::mismatch(cached_.begin(), cached_.end(), history_.begin(), history_.end());
  int64_t keep = int64_t(mismatch - cached_.begin());
  // Equal ids are not the same picture: the cached prefix ends at the first
  // run the cache encoded with another picture (or not at all).
  const std::vector<int64_t> starts = run_starts(history_, image_tokens_.image);
  const std::vector<Picture> pictures = history_pictures();
  if (starts.size() != pictures.size())
    throw Error("chat: the conversation has " + std::to_string(starts.size()) + " image placeholder runs for " +
                std::to_string(pictures.size()) + " pictures");
  size_t kept_runs = 0;
  for (; kept_runs < starts.size() && starts[kept_runs] < keep; ++kept_runs)
    if (kept_runs >= cached_pictures_.size() || cached_pictures_[kept_runs] != pictures[kept_runs].serial) {
      keep = starts[kept_runs];
      break;
    }
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
  while (kept_runs > 0 && starts[kept_runs - 1] >= keep) --kept_runs;  // a reset to 0 keeps none
  cached_pictures_.resize(std::min(cached_pictures_.size(), kept_runs));
  pending_pictures_.clear();
  for (size_t r = kept_runs; r < pictures.size(); ++r) {
    in.images.push_back(*pictures[r].input);
    pending_pictures_.push_back(pictures[r].serial);
  }
  in.reused = keep;
  in.dropped_turns = int64_t(first);
  in.new_ids.assign(history_.begin() + keep, history_.end());
  pending_ = in.new_ids;
  return in;
}

void ChatSession::end_turn(const GenerationResult& result, std::span<const int32_t> reply) {
  // generate() encoded the prompt and the leading committed canvases.
  cached_.insert(cached_.end(), pending_.begin(), pending_.end());
  cached_pictures_.insert(cached_pictures_.end(), pending_pictures_.begin(), pending_pictures_.end());
  pending_pictures_.clear();
  const int64_t encoded = model_.cache_length() - int64_t(cached_.size());
  const std::span<const int32_t> generated = result.generated();
  if (encoded < 0 || encoded > int64_t(generated.size()))
    throw Error("chat: the model cache holds " + std::to_string(model_.cache_length()) +
                " positions, which does not match the conversation");
  cached_.insert(cached_.end(), generated.begin(), generated.begin() + encoded);
  pending_.clear();

  history_.insert(history_.end(), reply.begin(), reply.end());
  history_.insert(history_.end(), closing_ids_.begin(), closing_ids_.end());
  if (!turns_.empty()) {
    std::vector<int32_t>& r = turns_.back().reply;
    r.assign(reply.begin(), reply.end());
    r.insert(r.end(), closing_ids_.begin(), closing_ids_.end());
  }
}

void ChatSession::reset() {
  model_.truncate_cache(0);
  history_.clear();
  cached_.clear();
  pending_.clear();
  turns_.clear();
  cached_pictures_.clear();
  pending_pictures_.clear();
}

}  // namespace dgemma

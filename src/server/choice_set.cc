#include "server/choice_set.h"

namespace dgemma::server {

ChoiceSet::ChoiceSet(std::vector<std::shared_ptr<ActiveRequest>> choices)
    : choices_(std::move(choices)),
      finished_(choices_.size(), false),
      dones_(choices_.size()),
      unfinished_(choices_.size()) {}

bool ChoiceSet::next(StreamEvent& event, size_t& which, std::chrono::milliseconds timeout) {
  if (unfinished_ == 0) return false;
  const size_t n = choices_.size();
  const auto take = [&](size_t i, std::chrono::milliseconds wait) {
    if (finished_[i] || !choices_[i]->next(event, wait)) return false;
    which = i;
    if (event.kind == StreamEvent::Kind::kDone || event.kind == StreamEvent::Kind::kError) {
      finished_[i] = true;
      --unfinished_;
      if (event.kind == StreamEvent::Kind::kDone) dones_[i] = event;
    }
    cursor_ = (i + 1) % n;
    return true;
  };
  // Whatever is ready, round robin from the cursor; else wait on the first
  // unfinished choice (an event of another one waits at most `timeout`).
  for (size_t k = 0; k < n; ++k)
    if (take((cursor_ + k) % n, std::chrono::milliseconds(0))) return true;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (cursor_ + k) % n;
    if (!finished_[i]) return take(i, timeout);
  }
  return false;
}

void ChoiceSet::cancel_unfinished(CompletionService& service) {
  for (size_t i = 0; i < choices_.size(); ++i)
    if (!finished_[i]) service.cancel(choices_[i]);
}

}  // namespace dgemma::server

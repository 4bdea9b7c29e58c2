#pragma once
// The n choices of one request (`n` > 1 generates several answers to one
// prompt side by side, docs/server.md §4), read as one stream of events each
// tagged with its choice index. With n = 1 it is the request itself.
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "server/service.h"

namespace dgemma::server {

class ChoiceSet {
 public:
  explicit ChoiceSet(std::vector<std::shared_ptr<ActiveRequest>> choices);

  size_t size() const { return choices_.size(); }
  ActiveRequest& first() { return *choices_.front(); }

  // The next event of any unfinished choice, waiting up to `timeout`; false
  // on timeout. `which` is the choice's index. After a choice's kDone or
  // kError nothing more comes from it.
  bool next(StreamEvent& event, size_t& which, std::chrono::milliseconds timeout);
  bool all_done() const { return unfinished_ == 0; }
  // The kDone events so far, by index (kind kText where not done yet).
  const std::vector<StreamEvent>& dones() const { return dones_; }
  // Cancels every choice that has not finished.
  void cancel_unfinished(CompletionService& service);

 private:
  std::vector<std::shared_ptr<ActiveRequest>> choices_;
  std::vector<bool> finished_;
  std::vector<StreamEvent> dones_;
  size_t unfinished_;
  size_t cursor_ = 0;  // where the next scan starts, so that no choice starves the others
};

}  // namespace dgemma::server

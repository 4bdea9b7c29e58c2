#pragma once
// While a reply streams to a terminal, keys typed at it must not show up
// inside the reply: the terminal's line discipline echoes each key as it is
// typed, between the model's words (and under `run --visualize` into the
// live region, behind its cursor model's back). QuietInput turns that echo
// off for its lifetime. What is typed meanwhile stays queued, as type-ahead
// does in a shell: `chat`'s next prompt shows it (a line ended with Enter is
// the next turn), and after `run` the shell reads it. Ctrl-C still
// interrupts (the line discipline then drops the queued keys, as it does
// for any interrupt).
#include <termios.h>

namespace dgemma::cli {

// The local modes of a quiet terminal: no echo of keys, of erase and kill
// (ECHOE, ECHOK, ECHOKE), of newlines (ECHONL) or of control keys as ^X
// (ECHOCTL); line editing (ICANON) and signals (ISIG) as they were.
tcflag_t quiet_local_modes(tcflag_t local_modes);

class QuietInput {
 public:
  // Quiets the terminal `fd` when it is one (else does nothing).
  explicit QuietInput(int fd);
  ~QuietInput();  // restores the modes it changed
  QuietInput(const QuietInput&) = delete;
  QuietInput& operator=(const QuietInput&) = delete;
  bool active() const { return active_; }

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

// Restores the echo of a terminal a QuietInput holds quiet, from a signal
// handler about to _exit (async-signal-safe: one tcsetattr).
void restore_input_echo_for_exit();

}  // namespace dgemma::cli

#pragma once
// Ctrl-C (SIGINT) for `run` and `chat`. While an InterruptHandler is alive,
// SIGINT does not kill the process: it sets a pending flag that generation
// polls (GenerationObserver::cancelled) and that interrupts a blocking read
// (the handler is installed without SA_RESTART, so read() fails with EINTR).
// A second SIGINT while the first is still pending — the program has not
// reacted yet, e.g. inside a long forward pass — exits at once with 130.
namespace dgemma::cli {

class InterruptHandler {
 public:
  InterruptHandler();   // installs the handler
  ~InterruptHandler();  // restores the previous disposition
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;
};

// Whether a SIGINT arrived that has not been taken yet.
bool interrupt_pending();
// Takes the pending SIGINT (returns whether there was one), so that the next
// one is handled normally again instead of exiting.
bool take_interrupt();

// Exit status of a process ended by Ctrl-C (128 + SIGINT), as shells report.
inline constexpr int kInterruptedExitCode = 130;

}  // namespace dgemma::cli

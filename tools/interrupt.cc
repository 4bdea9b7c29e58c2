#include "interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

#include "quiet_input.h"

namespace dgemma::cli {
namespace {

std::atomic<int> g_pending{0};
struct sigaction g_previous {};

extern "C" void on_sigint(int) {
  if (g_pending.exchange(1) != 0) {
    constexpr char kMsg[] = "\ndgemma: interrupted twice: exiting\n";
    [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    restore_input_echo_for_exit();  // a reply may have the terminal quiet (quiet_input.h)
    _exit(kInterruptedExitCode);
  }
}

}  // namespace

InterruptHandler::InterruptHandler() {
  g_pending = 0;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR
  sigaction(SIGINT, &sa, &g_previous);
}

InterruptHandler::~InterruptHandler() { sigaction(SIGINT, &g_previous, nullptr); }

bool interrupt_pending() { return g_pending.load() != 0; }

bool take_interrupt() { return g_pending.exchange(0) != 0; }

}  // namespace dgemma::cli

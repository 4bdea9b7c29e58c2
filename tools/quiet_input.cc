#include "quiet_input.h"

#include <unistd.h>

#include <csignal>

namespace dgemma::cli {
namespace {

// What restore_input_echo_for_exit() restores: the modes of the QuietInput
// alive (one at a time), published before the terminal is quieted.
termios g_exit_modes{};
volatile sig_atomic_t g_exit_fd = -1;

}  // namespace

tcflag_t quiet_local_modes(tcflag_t local_modes) {
  return local_modes & ~tcflag_t(ECHO | ECHOE | ECHOK | ECHOKE | ECHONL | ECHOCTL);
}

QuietInput::QuietInput(int fd) : fd_(fd) {
  if (!isatty(fd) || tcgetattr(fd, &saved_) != 0) return;
  termios quiet = saved_;
  quiet.c_lflag = quiet_local_modes(saved_.c_lflag);
  if (quiet.c_lflag == saved_.c_lflag) return;  // already quiet
  g_exit_modes = saved_;
  g_exit_fd = fd;
  // TCSANOW: nothing queued is lost (TCSAFLUSH would drop type-ahead).
  active_ = tcsetattr(fd, TCSANOW, &quiet) == 0;
  if (!active_) g_exit_fd = -1;
}

QuietInput::~QuietInput() {
  if (!active_) return;
  g_exit_fd = -1;
  tcsetattr(fd_, TCSANOW, &saved_);
}

void restore_input_echo_for_exit() {
  const int fd = g_exit_fd;
  if (fd >= 0) tcsetattr(fd, TCSANOW, &g_exit_modes);
}

}  // namespace dgemma::cli

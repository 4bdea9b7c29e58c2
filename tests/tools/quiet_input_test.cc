// Keys typed while a reply streams (tools/quiet_input.h): on a pseudo-
// terminal, the echo is off while a QuietInput lives and back after it, and
// what was typed meanwhile is still there to read (type-ahead is kept).
// What a pty cannot show: how a person's terminal renders it, and the chat
// loop's timing with a human typing (tests/cli/interrupt.sh drives chat on a
// pty for the line editor).
#include "quiet_input.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "prompt_file.h"

namespace dgemma::cli {
namespace {

TEST(QuietInput, LocalModesDropEveryEchoAndKeepLineEditingAndSignals) {
  const tcflag_t all = ECHO | ECHOE | ECHOK | ECHOKE | ECHONL | ECHOCTL | ICANON | ISIG | IEXTEN;
  const tcflag_t q = quiet_local_modes(all);
  EXPECT_EQ(q & (ECHO | ECHOE | ECHOK | ECHOKE | ECHONL | ECHOCTL), tcflag_t(0));
  EXPECT_EQ(q & (ICANON | ISIG | IEXTEN), ICANON | ISIG | IEXTEN);
}

// A pseudo-terminal: `master` is the keyboard and screen, `slave` what dgemma
// has as stdin.
struct Pty {
  int master = -1, slave = -1;
  Pty() {
    master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return;
    slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  }
  ~Pty() {
    if (slave >= 0) close(slave);
    if (master >= 0) close(master);
  }
  // What the screen receives within `ms` milliseconds.
  std::string screen(int ms) const {
    std::string out;
    pollfd p{master, POLLIN, 0};
    while (poll(&p, 1, ms) > 0) {
      char buf[256];
      const ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, size_t(n));
      ms = 20;  // the rest of a burst
    }
    return out;
  }
  void type(const std::string& keys) const { ASSERT_EQ(write(master, keys.data(), keys.size()), ssize_t(keys.size())); }
  bool echo() const {
    termios t{};
    tcgetattr(slave, &t);
    return (t.c_lflag & ECHO) != 0;
  }
};

TEST(QuietInput, NoEchoWhileAliveTypeAheadKept) {
  Pty pty;
  if (pty.slave < 0) GTEST_SKIP() << "no pseudo-terminal available";
  termios cooked{};
  ASSERT_EQ(tcgetattr(pty.slave, &cooked), 0);
  cooked.c_lflag |= ECHO | ICANON | ISIG;
  ASSERT_EQ(tcsetattr(pty.slave, TCSANOW, &cooked), 0);
  // Baseline: a cooked terminal echoes what is typed.
  pty.type("x\n");
  EXPECT_NE(pty.screen(500).find('x'), std::string::npos);
  char line[16];
  ASSERT_EQ(read(pty.slave, line, sizeof line), 2);  // "x\n", consumed

  {
    const QuietInput quiet(pty.slave);
    ASSERT_TRUE(quiet.active());
    EXPECT_FALSE(pty.echo());
    pty.type("abc");
    EXPECT_EQ(pty.screen(300), "");  // nothing echoed into the reply
  }
  EXPECT_TRUE(pty.echo());  // the modes are back
  // The keys typed meanwhile wait for the next read, as the line editor
  // (raw mode) reads them.
  termios raw = cooked;
  raw.c_lflag &= ~tcflag_t(ICANON | ECHO);
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 5;
  ASSERT_EQ(tcsetattr(pty.slave, TCSANOW, &raw), 0);
  char buf[16];
  const ssize_t n = read(pty.slave, buf, sizeof buf);
  EXPECT_EQ(std::string(buf, size_t(n > 0 ? n : 0)), "abc");
}

TEST(QuietInput, ExitRestoresTheEchoAndNonTerminalsAreLeftAlone) {
  Pty pty;
  if (pty.slave < 0) GTEST_SKIP() << "no pseudo-terminal available";
  termios cooked{};
  tcgetattr(pty.slave, &cooked);
  cooked.c_lflag |= ECHO;
  tcsetattr(pty.slave, TCSANOW, &cooked);
  {
    const QuietInput quiet(pty.slave);
    ASSERT_FALSE(pty.echo());
    restore_input_echo_for_exit();  // what the second Ctrl-C does before _exit
    EXPECT_TRUE(pty.echo());
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_FALSE(QuietInput(fds[0]).active());
  close(fds[0]);
  close(fds[1]);
}

TEST(PromptFile, FinalLineBreaksGo) {
  EXPECT_EQ(without_final_line_breaks("a\nb\n\n"), "a\nb");
  EXPECT_EQ(without_final_line_breaks("a\r\n"), "a");
  EXPECT_EQ(without_final_line_breaks("\n a "), "\n a ");
  EXPECT_EQ(without_final_line_breaks(""), "");
}

}  // namespace
}  // namespace dgemma::cli

#include "line_editor.h"

#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "interrupt.h"
#include "terminal.h"

namespace dgemma::cli {
namespace {

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Raw mode on stdin for one read; restored on every exit path.
class RawMode {
 public:
  RawMode() {
    if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_iflag &= ~tcflag_t(ICRNL | IXON | INLCR | IGNCR);
    raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
  }
  ~RawMode() {
    if (active_) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

enum : int { kKeyEof = -1, kKeyInterrupt = -2 };

// One byte from stdin; kKeyInterrupt when a SIGINT is pending.
int read_byte() {
  while (true) {
    if (interrupt_pending()) return kKeyInterrupt;
    unsigned char b = 0;
    const ssize_t n = ::read(STDIN_FILENO, &b, 1);
    if (n == 1) return b;
    if (n == 0) return kKeyEof;
    if (errno != EINTR) return kKeyEof;
  }
}

void refresh(const std::string& prompt, const EditBuffer& buf) {
  const EditView v = edit_view(prompt, buf.text(), buf.cursor(), terminal_columns(stdout));
  std::string out = "\r" + prompt + v.visible + "\x1b[K\r";
  if (v.cursor_column > 0) out += "\x1b[" + std::to_string(v.cursor_column) + "C";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void EditBuffer::set(std::string text) {
  text_ = std::move(text);
  cursor_ = text_.size();
}

void EditBuffer::insert(const std::string& s) {
  text_.insert(cursor_, s);
  cursor_ += s.size();
}

void EditBuffer::left() {
  while (cursor_ > 0) {
    --cursor_;
    if (!continuation_byte(text_[cursor_])) break;
  }
}

void EditBuffer::right() {
  if (cursor_ >= text_.size()) return;
  ++cursor_;
  while (cursor_ < text_.size() && continuation_byte(text_[cursor_])) ++cursor_;
}

void EditBuffer::backspace() {
  const size_t end = cursor_;
  left();
  text_.erase(cursor_, end - cursor_);
}

void EditBuffer::erase() {
  const size_t start = cursor_;
  right();
  text_.erase(start, cursor_ - start);
  cursor_ = start;
}

void EditBuffer::kill_to_start() {
  text_.erase(0, cursor_);
  cursor_ = 0;
}

void EditBuffer::kill_word() {
  size_t start = cursor_;
  while (start > 0 && text_[start - 1] == ' ') --start;
  while (start > 0 && text_[start - 1] != ' ') --start;
  text_.erase(start, cursor_ - start);
  cursor_ = start;
}

EditView edit_view(const std::string& prompt, const std::string& text, size_t cursor, int columns) {
  const int room = std::max(1, columns - 1 - display_width(prompt));
  // Scroll: drop leading characters until the cursor fits.
  size_t start = 0;
  while (start < cursor && display_width(std::string_view(text).substr(start, cursor - start)) >= room) {
    ++start;
    while (start < text.size() && continuation_byte(text[start])) ++start;
  }
  // Then keep what fits from `start`.
  size_t end = start;
  int width = 0;
  while (end < text.size()) {
    size_t next = end + 1;
    while (next < text.size() && continuation_byte(text[next])) ++next;
    const int w = display_width(std::string_view(text).substr(end, next - end));
    if (width + w > room) break;
    width += w;
    end = next;
  }
  EditView v;
  v.visible = sanitize_for_terminal(text.substr(start, end - start));
  v.cursor_column = display_width(prompt) + display_width(std::string_view(text).substr(start, cursor - start));
  return v;
}

LineEditor::Result LineEditor::read(const std::string& prompt, std::string& line) {
  std::fflush(stdout);
  const RawMode raw;
  EditBuffer buf;
  size_t hist = history_.size();  // == size(): the line being typed
  std::string typed;              // the new line while browsing the history
  const auto browse = [&](size_t to) {
    if (hist == history_.size()) typed = buf.text();
    hist = to;
    buf.set(hist == history_.size() ? typed : history_[hist]);
  };
  refresh(prompt, buf);
  while (true) {
    const int c = read_byte();
    if (c == kKeyInterrupt || c == 3) {  // Ctrl-C
      std::fputs("^C\r\n", stdout);
      std::fflush(stdout);
      return Result::kInterrupted;
    }
    if (c == kKeyEof || (c == 4 && buf.text().empty())) {  // Ctrl-D on an empty line
      std::fputs("\r\n", stdout);
      std::fflush(stdout);
      return Result::kEof;
    }
    switch (c) {
      case '\r':
      case '\n':
        std::fputs("\r\n", stdout);
        std::fflush(stdout);
        line = buf.text();
        if (!line.empty() && (history_.empty() || history_.back() != line)) history_.push_back(line);
        return Result::kLine;
      case 1: buf.home(); break;   // Ctrl-A
      case 2: buf.left(); break;   // Ctrl-B
      case 4: buf.erase(); break;  // Ctrl-D
      case 5: buf.end(); break;    // Ctrl-E
      case 6: buf.right(); break;  // Ctrl-F
      case 8:
      case 127: buf.backspace(); break;
      case 11: buf.kill_to_end(); break;                    // Ctrl-K
      case 12: std::fputs("\x1b[H\x1b[2J", stdout); break;  // Ctrl-L
      case 14:
        if (hist < history_.size()) browse(hist + 1);
        break;  // Ctrl-N
      case 16:
        if (hist > 0) browse(hist - 1);
        break;                              // Ctrl-P
      case 21: buf.kill_to_start(); break;  // Ctrl-U
      case 23: buf.kill_word(); break;      // Ctrl-W
      case 27: {                            // ESC [ X, ESC O X, ESC [ n ~
        const int a = read_byte();
        if (a != '[' && a != 'O') break;
        int b = read_byte();
        int num = 0;
        while (b >= '0' && b <= '9') {
          num = num * 10 + (b - '0');
          b = read_byte();
        }
        if (b == 'A' && hist > 0)
          browse(hist - 1);
        else if (b == 'B' && hist < history_.size())
          browse(hist + 1);
        else if (b == 'C')
          buf.right();
        else if (b == 'D')
          buf.left();
        else if (b == 'H')
          buf.home();
        else if (b == 'F')
          buf.end();
        else if (b == '~' && (num == 1 || num == 7))
          buf.home();
        else if (b == '~' && (num == 4 || num == 8))
          buf.end();
        else if (b == '~' && num == 3)
          buf.erase();
        break;
      }
      default:
        if (c >= 0x20 && c != 127) {
          // A whole UTF-8 sequence at once, so that the cursor stays on a
          // code point boundary.
          std::string s(1, char(c));
          const int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
          for (int k = 0; k < more; ++k) {
            const int d = read_byte();
            if (d < 0) break;
            s += char(d);
          }
          buf.insert(s);
        }
        break;
    }
    refresh(prompt, buf);
  }
}

}  // namespace dgemma::cli

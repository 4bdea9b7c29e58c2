#include "terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "unicode_width_table.h"

namespace dgemma::cli {
namespace {

// Decodes one UTF-8 sequence at s[i]; advances i. Invalid bytes give U+FFFD.
char32_t next_codepoint(std::string_view s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + size_t(n) > s.size()) {
    ++i;
    return 0xFFFD;
  }
  char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (int k = 1; k < n; ++k) {
    const auto cb = static_cast<unsigned char>(s[i + size_t(k)]);
    if ((cb & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    c = (c << 6) | (cb & 0x3F);
  }
  i += size_t(n);
  return c;
}

bool in(std::span<const WidthRange> ranges, char32_t c) {
  const auto it =
      std::upper_bound(ranges.begin(), ranges.end(), c, [](char32_t v, const WidthRange& r) { return v < r.lo; });
  return it != ranges.begin() && c <= std::prev(it)->hi;
}

std::atomic<int> g_resized{0};
extern "C" void on_sigwinch(int) { g_resized = 1; }

}  // namespace

bool is_tty(FILE* f) { return isatty(fileno(f)) != 0; }

int terminal_columns(FILE* f) {
  struct winsize w {};
  if (ioctl(fileno(f), TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

int terminal_rows(FILE* f) {
  struct winsize w {};
  if (ioctl(fileno(f), TIOCGWINSZ, &w) == 0) return w.ws_row;
  return 0;
}

TerminalCaps terminal_caps(FILE* f) {
  TerminalCaps caps;
  caps.tty = is_tty(f);
  const char* term = std::getenv("TERM");
  caps.cursor = caps.tty && !(term != nullptr && std::strcmp(term, "dumb") == 0);
  const char* no_color = std::getenv("NO_COLOR");
  caps.color = caps.cursor && (no_color == nullptr || no_color[0] == '\0');
  return caps;
}

void watch_window_size() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = on_sigwinch;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(SIGWINCH, &sa, nullptr) == 0;
  }();
  (void)installed;
}

bool window_resized() { return g_resized.exchange(0) != 0; }

int codepoint_width(char32_t c) {
  if (c >= 0x20 && c < 0x300) return 1;  // fast path: ASCII and Latin
  if (in(zero_width_ranges(), c)) return 0;
  if (in(double_width_ranges(), c)) return 2;
  return 1;
}

int display_width(std::string_view text) {
  int width = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7E)) ++i;
      ++i;
      continue;
    }
    width += codepoint_width(next_codepoint(text, i));
  }
  return width;
}

std::string sanitize_for_terminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if (b == '\n')
      out += '\n';
    else if (b == '\t')
      out += ' ';
    else if (b < 0x20 || b == 0x7F)
      out += "\xEF\xBF\xBD";
    else
      out += ch;
  }
  return out;
}

int CursorModel::advance(std::string_view text) {
  int rows = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {  // CSI: ESC [ params final
      i += 2;
      while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7E)) ++i;
      ++i;
      continue;
    }
    if (text[i] == '\n') {
      ++rows;
      column_ = 0;
      ++i;
      continue;
    }
    if (text[i] == '\r') {
      column_ = 0;
      ++i;
      continue;
    }
    const int w = codepoint_width(next_codepoint(text, i));
    if (w == 0) continue;
    if (column_ + w > columns_) {  // wraps before this character
      ++rows;
      column_ = 0;
    }
    column_ += w;
  }
  return rows;
}

namespace {

// The first max_rows - 1 lines of `text` and its last line (at most max_rows
// lines in all); `text` itself when it fits or max_rows < 1.
std::string_view clip_rows(std::string_view text, int max_rows, std::string& storage) {
  const auto lines = 1 + std::count(text.begin(), text.end(), '\n');
  if (max_rows < 1 || lines <= max_rows) return text;
  size_t head_end = 0;
  for (int k = 0; k < max_rows - 1; ++k) head_end = text.find('\n', head_end) + 1;
  const size_t last = text.rfind('\n');
  storage.assign(text.substr(0, head_end));
  storage.append(text.substr(last + 1));
  return storage;
}

}  // namespace

void LiveRegion::follow_resize() {
  if (!window_resized()) return;
  cursor_.set_columns(terminal_columns(out_));
  rows_ = terminal_rows(out_);
}

int LiveRegion::columns() {
  follow_resize();
  return cursor_.columns();
}

void LiveRegion::clear() {
  if (!drawn_) return;
  std::fputs(
      "\x1b"
      "8\x1b[J",
      out_);  // DECRC: back to the end of the permanent text; erase below
  drawn_ = false;
}

void LiveRegion::print(std::string_view text) {
  clear();
  std::fwrite(text.data(), 1, text.size(), out_);
  cursor_.advance(text);
  if (cursor_.column() >= columns()) {
    // The text filled its last row exactly: start the next row now, as the
    // terminal's pending wrap would, so that the saved position is not on
    // the text's last character.
    std::fputs("\r\n", out_);
    cursor_.set_column(0);
  }
  std::fflush(out_);
}

void LiveRegion::draw(std::string_view text) {
  clear();
  follow_resize();
  std::string clipped;
  // One row of the screen holds the end of the permanent text.
  text = clip_rows(text, rows_ - 1, clipped);
  const int region_rows = 1 + int(std::count(text.begin(), text.end(), '\n'));
  // Reserve the rows (IND scrolls at the bottom margin, keeping the column),
  // climb back to the end of the permanent text and save the position there.
  for (int k = 0; k < region_rows; ++k)
    std::fputs(
        "\x1b"
        "D",
        out_);
  std::fprintf(out_,
               "\x1b[%dA\x1b"
               "7",
               region_rows);
  std::fputs("\x1b[?7l\n", out_);  // auto-wrap off; the region starts on the next row
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fputs("\x1b[?7h", out_);
  drawn_ = true;
  std::fflush(out_);
}

}  // namespace dgemma::cli

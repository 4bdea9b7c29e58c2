#include "terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

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

struct Range {
  char32_t lo, hi;
};

bool in(const Range* r, size_t n, char32_t c) {
  for (size_t k = 0; k < n; ++k)
    if (c >= r[k].lo && c <= r[k].hi) return true;
  return false;
}

}  // namespace

bool is_tty(FILE* f) { return isatty(fileno(f)) != 0; }

int terminal_columns(FILE* f) {
  struct winsize w {};
  if (ioctl(fileno(f), TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

int codepoint_width(char32_t c) {
  // Approximations of Unicode's zero-width (Mn/Me/Cf) and East Asian Wide /
  // Fullwidth classes; a wrong guess only misplaces a redraw by a column.
  static const Range kZero[] = {{0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A},
                                {0x064B, 0x065F}, {0x0E31, 0x0E31}, {0x0E34, 0x0E3A}, {0x0E47, 0x0E4E},
                                {0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x2064}, {0x20D0, 0x20FF},
                                {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}, {0xE0100, 0xE01EF}};
  static const Range kWide[] = {{0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},
                                {0x25FD, 0x25FE},   {0x2614, 0x2615},   {0x2648, 0x2653},   {0x26AA, 0x26AB},
                                {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},
                                {0xA000, 0xA4CF},   {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},
                                {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},
                                {0x16FE0, 0x18CFF}, {0x1B000, 0x1B2FF}, {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF},
                                {0x1F900, 0x1F9FF}, {0x1FA70, 0x1FAFF}, {0x20000, 0x3FFFD}};
  if (c < 0x300) return 1;
  if (in(kZero, sizeof kZero / sizeof kZero[0], c)) return 0;
  if (in(kWide, sizeof kWide / sizeof kWide[0], c)) return 2;
  return 1;
}

std::string sanitize_for_terminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if (b == '\n') out += '\n';
    else if (b == '\t') out += ' ';
    else if (b < 0x20 || b == 0x7F) out += "\xEF\xBF\xBD";
    else out += ch;
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

void LiveRegion::clear() {
  if (!drawn_) return;
  // Back to where the region started: up its rows, to its column, then
  // erase to the end of the screen.
  if (region_rows_ > 0) std::fprintf(out_, "\x1b[%dA", region_rows_);
  std::fputc('\r', out_);
  if (region_start_col_ > 0) std::fprintf(out_, "\x1b[%dC", region_start_col_);
  std::fputs("\x1b[J", out_);
  // The cursor model returns to the region's start.
  cursor_.set_column(region_start_col_);
  drawn_ = false;
}

void LiveRegion::print(std::string_view text) {
  clear();
  std::fwrite(text.data(), 1, text.size(), out_);
  cursor_.advance(text);
  std::fflush(out_);
}

void LiveRegion::draw(std::string_view text) {
  clear();
  region_start_col_ = cursor_.column();
  std::fwrite(text.data(), 1, text.size(), out_);
  region_rows_ = cursor_.advance(text);
  drawn_ = true;
  std::fflush(out_);
}

}  // namespace dgemma::cli

#pragma once
// A small VT100-style screen for the live region's tests: it interprets the
// bytes LiveRegion writes (printable UTF-8, CR, LF as CR+LF the way a tty's
// ONLCR sends it, IND, DECSC/DECRC, CUU, CUF, ED, DECAWM, SGR ignored) on a
// grid with scrolling and pending wrap, and gives back the text that the
// screen and its scrollback hold. Its character widths come from a function,
// so that a test can give it other widths than the engine's (as tmux does for
// a letter after a ZWJ, which it puts in the ZWJ's cell).
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dgemma::cli::testing {

class VtScreen {
 public:
  // width(previous code point, code point) -> cells (0, 1 or 2).
  using WidthFn = std::function<int(char32_t, char32_t)>;
  VtScreen(int columns, int rows, WidthFn width) : columns_(columns), rows_(rows), width_(std::move(width)) {
    for (int r = 0; r < rows_; ++r) screen_.push_back(blank_row());
  }

  void feed(std::string_view bytes) {
    for (size_t i = 0; i < bytes.size();) {
      const auto b = static_cast<unsigned char>(bytes[i]);
      if (b == 0x1b) {
        i = escape(bytes, i + 1);
      } else if (b == '\r') {
        col_ = 0, wrap_pending_ = false, ++i;
      } else if (b == '\n') {
        col_ = 0, wrap_pending_ = false, line_feed(), ++i;
      } else {
        size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
        put(bytes.substr(i, n), decode(bytes.substr(i, n)));
        i += n;
      }
    }
  }

  // Scrollback and screen rows, soft-wrapped rows joined, trailing blanks of
  // each row and trailing empty rows dropped.
  std::string text() const {
    std::vector<const Row*> all;
    for (const Row& r : history_) all.push_back(&r);
    for (const Row& r : screen_) all.push_back(&r);
    std::string out;
    for (const Row* r : all) {
      std::string line;
      for (const Cell& c : r->cells) line += c.continuation ? "" : c.text.empty() ? " " : c.text;
      if (!r->wrapped) line.erase(line.find_last_not_of(' ') + 1);
      out += line;
      if (!r->wrapped) out += '\n';
    }
    out.erase(out.find_last_not_of('\n') + 1);
    return out;
  }

  int cursor_row() const { return row_; }
  int cursor_column() const { return col_; }

 private:
  struct Cell {
    std::string text;
    bool continuation = false;  // second cell of a wide character
  };
  struct Row {
    std::vector<Cell> cells;
    bool wrapped = false;  // the text continues on the next row (auto-wrap)
  };

  Row blank_row() const { return Row{std::vector<Cell>(size_t(columns_)), false}; }

  static char32_t decode(std::string_view s) {
    const auto b = static_cast<unsigned char>(s[0]);
    char32_t c = s.size() == 1 ? b : s.size() == 2 ? (b & 0x1F) : s.size() == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < s.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
    return c;
  }

  void line_feed() {
    if (row_ + 1 < rows_) {
      ++row_;
      return;
    }
    history_.push_back(screen_.front());
    screen_.erase(screen_.begin());
    screen_.push_back(blank_row());
  }

  void put(std::string_view utf8, char32_t c) {
    const int w = width_(prev_, c);
    prev_ = c;
    if (w == 0) {  // joins the cell written last
      const int at = wrap_pending_ ? col_ : col_ - 1;
      if (at >= 0) screen_[size_t(row_)].cells[size_t(at)].text += utf8;
      return;
    }
    if (wrap_pending_ || col_ + w > columns_) {
      if (autowrap_) {
        screen_[size_t(row_)].wrapped = true;
        col_ = 0;
        line_feed();
      } else {
        col_ = columns_ - w;  // without auto-wrap the last column is overwritten
      }
      wrap_pending_ = false;
    }
    auto& cells = screen_[size_t(row_)].cells;
    cells[size_t(col_)] = Cell{std::string(utf8), false};
    if (w == 2) cells[size_t(col_ + 1)] = Cell{"", true};
    col_ += w;
    if (col_ >= columns_) {
      col_ = columns_ - 1;
      wrap_pending_ = true;
    }
  }

  size_t escape(std::string_view s, size_t i) {
    if (i >= s.size()) return i;
    const char k = s[i];
    if (k == '7') saved_row_ = row_, saved_col_ = col_;
    if (k == '8') row_ = saved_row_, col_ = saved_col_, wrap_pending_ = false;
    if (k == 'D') wrap_pending_ = false, line_feed();
    if (k != '[') return i + 1;
    size_t j = i + 1;
    const bool private_mode = j < s.size() && s[j] == '?';
    if (private_mode) ++j;
    int n = 0;
    bool has_n = false;
    for (; j < s.size() && s[j] >= '0' && s[j] <= '9'; ++j) n = n * 10 + (s[j] - '0'), has_n = true;
    while (j < s.size() && !(s[j] >= 0x40 && s[j] <= 0x7E)) ++j;
    if (j >= s.size()) return j;
    const char final_byte = s[j];
    if (!has_n) n = final_byte == 'J' ? 0 : 1;
    if (private_mode && n == 7) autowrap_ = final_byte == 'h';
    if (!private_mode && final_byte == 'A') row_ = std::max(0, row_ - n), wrap_pending_ = false;
    if (!private_mode && final_byte == 'C') col_ = std::min(columns_ - 1, col_ + n), wrap_pending_ = false;
    if (!private_mode && final_byte == 'J' && n == 0) {
      auto& cells = screen_[size_t(row_)].cells;
      for (int c = col_; c < columns_; ++c) cells[size_t(c)] = Cell{};
      screen_[size_t(row_)].wrapped = false;
      for (int r = row_ + 1; r < rows_; ++r) screen_[size_t(r)] = blank_row();
    }
    return j + 1;
  }

  int columns_, rows_;
  WidthFn width_;
  std::vector<Row> history_, screen_;
  int row_ = 0, col_ = 0, saved_row_ = 0, saved_col_ = 0;
  bool wrap_pending_ = false, autowrap_ = true;
  char32_t prev_ = 0;
};

}  // namespace dgemma::cli::testing

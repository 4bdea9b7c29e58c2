#pragma once
// Terminal helpers for `run --visualize` and `chat`: TTY detection, width,
// and a cursor model that lets a region printed after some text be erased
// and redrawn in place with plain ANSI sequences (no curses).
#include <cstdio>
#include <string>
#include <string_view>

namespace dgemma::cli {

bool is_tty(FILE* f);
// Columns of the terminal behind `f` (80 when unknown).
int terminal_columns(FILE* f);
// Rows of the terminal behind `f` (0 when unknown).
int terminal_rows(FILE* f);

// What the terminal behind `f` may be sent: cursor movement needs a TTY
// whose TERM is not "dumb"; colour additionally needs NO_COLOR unset or
// empty (https://no-color.org).
struct TerminalCaps {
  bool tty = false;
  bool cursor = false;
  bool color = false;
};
TerminalCaps terminal_caps(FILE* f);

// Starts following SIGWINCH (idempotent); window_resized() then says, once
// per resize, that terminal_columns() should be read again.
void watch_window_size();
bool window_resized();

// Display width of one code point, from the generated Unicode tables
// (unicode_width_table.cc): 0 for combining marks, Indic/Thai vowel signs,
// variation selectors, ZWJ and other format characters; 2 for East Asian
// Wide/Fullwidth characters and emoji with emoji presentation; else 1.
int codepoint_width(char32_t c);
// Display width of UTF-8 text, skipping ANSI CSI sequences (no wrapping).
int display_width(std::string_view text);

// Replaces C0 controls except '\n' and DEL by U+FFFD and tabs by a space, so
// that model output cannot move the cursor behind the cursor model's back.
std::string sanitize_for_terminal(std::string_view text);

// Follows the cursor column over printed text, given the terminal width.
// ANSI CSI sequences ("\x1b[...m") have no width; '\n' starts a new row;
// a character that does not fit wraps.
class CursorModel {
 public:
  explicit CursorModel(int columns) : columns_(columns < 1 ? 80 : columns) {}
  // Advances over `text`; returns how many rows the cursor moved down.
  int advance(std::string_view text);
  int column() const { return column_; }
  int columns() const { return columns_; }
  void set_column(int column) { column_ = column; }
  void set_columns(int columns) { columns_ = columns < 1 ? 80 : columns; }

 private:
  int columns_;
  int column_ = 0;
};

// A region at the end of the output that is redrawn in place: the text
// before it stays; draw() erases the previous drawing and prints the new one.
//
// The erase does not depend on knowing how wide the terminal thinks the
// permanent text is: before drawing, the region's rows are reserved below
// the text (IND, which scrolls at the bottom and keeps the column), the
// cursor climbs back and is saved (DECSC); the erase restores it (DECRC) and
// clears to the end of the screen. Terminals disagree about the width of
// grapheme clusters (tmux gives a letter after a ZWJ no cell of its own;
// wcwidth() gives it one), and a column computed here would leave a gap or
// overwrite a character of the committed text. The region itself is drawn
// with auto-wrap off, so it spans one row per '\n' in it whatever the widths
// (the caller breaks its lines to fit columns(): see canvas_frame.h), and it
// is clipped to the terminal's height less one row, keeping its first rows
// and its last (status) row, so the reservation never scrolls the saved
// position off the screen. The size is re-read after SIGWINCH.
//
// The cursor model is used for one thing only: text that ends exactly at
// the last column leaves the terminal's cursor on that column (pending
// wrap), where the erase would take the last character; print() starts the
// next row itself then.
class LiveRegion {
 public:
  // rows = 0: the terminal's height is unknown, the region is not clipped.
  LiveRegion(FILE* out, int columns, int rows = 0) : out_(out), cursor_(columns), rows_(rows) {}
  // Prints permanent text (erasing the live region first).
  void print(std::string_view text);
  // Replaces the live region with `text` (lines separated by '\n').
  void draw(std::string_view text);
  // Erases the live region.
  void clear();
  // Terminal columns as last read.
  int columns();

 private:
  void follow_resize();

  FILE* out_;
  CursorModel cursor_;
  int rows_;
  bool drawn_ = false;
};

namespace ansi {
inline constexpr const char* kReset = "\x1b[0m";
inline constexpr const char* kBold = "\x1b[1m";
inline constexpr const char* kDim = "\x1b[2m";
inline constexpr const char* kAccepted = "\x1b[1;32m";  // bold green
inline constexpr const char* kStatus = "\x1b[36m";      // cyan
}  // namespace ansi

}  // namespace dgemma::cli

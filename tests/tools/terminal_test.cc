// Display width of code points (generated Unicode tables), the visualize
// frame layout and the live region's erase arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "canvas_frame.h"
#include "terminal.h"
#include "unicode_width_table.h"
#include "vt_screen.h"

namespace dgemma::cli {
namespace {

TEST(CodepointWidth, KnownCodePoints) {
  EXPECT_EQ(codepoint_width(U'a'), 1);
  EXPECT_EQ(codepoint_width(U'é'), 1);
  EXPECT_EQ(codepoint_width(0x0301), 0);   // combining acute accent
  EXPECT_EQ(codepoint_width(0x20DD), 0);   // combining enclosing circle (Me)
  EXPECT_EQ(codepoint_width(0x093F), 1);   // Devanagari vowel sign I (Mc: spacing)
  EXPECT_EQ(codepoint_width(0x0941), 0);   // Devanagari vowel sign U (Mn)
  EXPECT_EQ(codepoint_width(0x094D), 0);   // Devanagari virama
  EXPECT_EQ(codepoint_width(0x0E31), 0);   // Thai mai han-akat
  EXPECT_EQ(codepoint_width(0x0E48), 0);   // Thai tone mark mai ek
  EXPECT_EQ(codepoint_width(0x0E01), 1);   // Thai ko kai
  EXPECT_EQ(codepoint_width(0x200D), 0);   // zero width joiner
  EXPECT_EQ(codepoint_width(0x200B), 0);   // zero width space
  EXPECT_EQ(codepoint_width(0xFE0F), 0);   // variation selector 16
  EXPECT_EQ(codepoint_width(0xE0101), 0);  // variation selector 18
  EXPECT_EQ(codepoint_width(0x1160), 0);   // Hangul jungseong filler
  EXPECT_EQ(codepoint_width(0x00AD), 1);   // soft hyphen: terminals draw it
  EXPECT_EQ(codepoint_width(0x4E2D), 2);   // 中
  EXPECT_EQ(codepoint_width(0xAC00), 2);   // 가
  EXPECT_EQ(codepoint_width(0x3042), 2);   // あ
  EXPECT_EQ(codepoint_width(0xFF21), 2);   // fullwidth A
  EXPECT_EQ(codepoint_width(0x1F600), 2);  // 😀
  EXPECT_EQ(codepoint_width(0x1F44D), 2);  // 👍
  EXPECT_EQ(codepoint_width(0x1FAE0), 2);  // melting face (Unicode 14)
  EXPECT_EQ(codepoint_width(0x231A), 2);   // ⌚ (emoji presentation)
  EXPECT_EQ(codepoint_width(0x2764), 1);   // ❤ (text presentation by default)
  EXPECT_EQ(codepoint_width(0x2F800), 2);  // CJK compatibility supplement
  EXPECT_EQ(codepoint_width(0x3FFFD), 2);  // plane 3, reserved wide
  EXPECT_EQ(codepoint_width(0x1F1E6), 1);  // regional indicator A (East Asian Width N)
}

TEST(CodepointWidth, TablesAreSortedAndDisjoint) {
  for (const std::span<const WidthRange> table : {zero_width_ranges(), double_width_ranges()}) {
    ASSERT_FALSE(table.empty());
    for (size_t i = 0; i < table.size(); ++i) {
      EXPECT_LE(table[i].lo, table[i].hi);
      if (i > 0) {
        EXPECT_LT(table[i - 1].hi, table[i].lo);
      }
    }
  }
}

TEST(DisplayWidth, SkipsEscapesAndCountsClusters) {
  EXPECT_EQ(display_width("abc"), 3);
  EXPECT_EQ(display_width("\x1b[1;32mab\x1b[0m"), 2);
  EXPECT_EQ(display_width("中文"), 4);
  EXPECT_EQ(display_width("e\xCC\x81"), 1);                         // e + combining acute
  EXPECT_EQ(display_width("\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD"), 4);  // 👍🏽: the skin tone modifier is wide too
  EXPECT_EQ(display_width("\xE0\xA4\x95\xE0\xA5\x8D"), 1);          // क्
}

std::vector<FrameCell> cells(std::initializer_list<std::pair<const char*, bool>> list) {
  std::vector<FrameCell> out;
  for (const auto& [t, s] : list) out.push_back({t, s});
  return out;
}

int rows_of(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')) + 1; }

TEST(LayoutFrame, RowsNeverReachTheLastColumn) {
  std::vector<FrameCell> many;
  for (int i = 0; i < 200; ++i) many.push_back({i % 3 == 0 ? "中文" : i % 3 == 1 ? "ab" : "e\xCC\x81", i % 2 == 0});
  for (const int columns : {10, 17, 80, 160}) {
    const std::string frame = layout_frame(many, "status", columns, true);
    size_t start = 0;
    int widest = 0;
    while (start <= frame.size()) {
      size_t end = frame.find('\n', start);
      if (end == std::string::npos) end = frame.size();
      widest = std::max(widest, display_width(std::string_view(frame).substr(start, end - start)));
      start = end + 1;
    }
    EXPECT_LE(widest, columns - 1) << columns;
  }
}

TEST(LayoutFrame, BreaksBetweenTokensAndEndsWithTheStatus) {
  const std::string f = layout_frame(cells({{"abcd", true}, {"efgh", false}, {"ij", true}}), "s", 10, false);
  EXPECT_EQ(f, "abcd____\nij\n[s]");
  EXPECT_EQ(rows_of(f), 3);
  const std::string colored = layout_frame(cells({{"ab", true}, {"cd", false}}), "s", 80, true);
  EXPECT_EQ(colored, std::string(ansi::kAccepted) + "ab" + ansi::kReset + ansi::kDim + "cd" + ansi::kReset + "\n" +
                         ansi::kStatus + "[s]" + ansi::kReset);
}

TEST(FrameTokens, LastStepShowsTheArgmax) {
  const std::vector<int32_t> out = {5, 6, 7}, argmax = {1, 2, 3};
  const std::vector<uint8_t> accepted = {1, 0, 0};
  StepEvent e;
  e.canvas_out = out;
  e.argmax = argmax;
  e.accepted = accepted;
  e.cur_step = 3;
  FrameTokens f = frame_tokens(e);
  EXPECT_EQ(std::vector<int32_t>(f.ids.begin(), f.ids.end()), out);
  EXPECT_EQ(f.settled, accepted);
  e.stop = true;  // stable and confident: this step commits its argmax
  f = frame_tokens(e);
  EXPECT_EQ(std::vector<int32_t>(f.ids.begin(), f.ids.end()), argmax);
  EXPECT_EQ(f.settled, std::vector<uint8_t>(3, 1));
  e.stop = false;
  e.cur_step = 1;  // the last step the budget allows
  EXPECT_TRUE(is_last_step(e));
}

std::string run_region(int columns, const std::function<void(LiveRegion&)>& body, int rows = 0) {
  FILE* f = std::tmpfile();
  {
    LiveRegion r(f, columns, rows);
    body(r);
  }
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += char(c);
  std::fclose(f);
  return s;
}

TEST(LiveRegion, EraseReturnsToTheSavedEndOfThePermanentText) {
  const std::string s = run_region(20, [](LiveRegion& r) {
    r.print("committed 中文");
    r.draw("row1\nrow2\n[status]");
    r.draw("x");
    r.print(" more");
  });
  // Each frame reserves its rows below the text (IND per row: the row break
  // and one per line), climbs back and saves the position (DECSC), then
  // draws with auto-wrap off from the next row; the erase restores the
  // position (DECRC) and clears below. No column arithmetic is sent.
  const std::string first =
      "\x1b"
      "D\x1b"
      "D\x1b"
      "D\x1b[3A\x1b"
      "7\x1b[?7l\nrow1\nrow2\n[status]\x1b[?7h";
  const std::string second =
      "\x1b"
      "D\x1b[1A\x1b"
      "7\x1b[?7l\nx\x1b[?7h";
  const std::string erase =
      "\x1b"
      "8\x1b[J";
  EXPECT_EQ(s, "committed 中文" + first + erase + second + erase + " more");
}

TEST(LiveRegion, TextEndingAtTheLastColumnStartsANewRow) {
  const std::string s = run_region(4, [](LiveRegion& r) {
    r.print("abcd");
    r.draw("f");
  });
  EXPECT_EQ(s,
            "abcd\r\n\x1b"
            "D\x1b[1A\x1b"
            "7\x1b[?7l\nf\x1b[?7h");
}

// The engine's widths, except that the terminal puts a letter that follows a
// ZWJ into the ZWJ's cell (tmux 3.3's rule; wcwidth() gives it a cell).
int joins_after_zwj(char32_t previous, char32_t c) { return previous == 0x200D ? 0 : codepoint_width(c); }
int engine_widths(char32_t, char32_t c) { return codepoint_width(c); }

// Prints `chunks` as permanent text with a frame drawn after each one, on a
// VtScreen, and returns what the screen ends with.
std::string screen_after(int columns, int rows, testing::VtScreen::WidthFn width,
                         const std::vector<std::string>& chunks, const std::string& frame) {
  const std::string bytes = run_region(
      columns,
      [&](LiveRegion& r) {
        for (const std::string& c : chunks) {
          r.print(c);
          r.draw(frame);
        }
        r.clear();
      },
      rows);
  testing::VtScreen screen(columns, rows, std::move(width));
  screen.feed(bytes);
  return screen.text();
}

TEST(LiveRegion, AWidthTheTerminalCountsDifferentlyLeavesNoGapInTheText) {
  // "ഗ്‍ര": the letter after the ZWJ takes no cell in this terminal, one in
  // the engine's model; the model's column is one too far from then on.
  const std::vector<std::string> chunks = {"Hello", " കോണ്\u200dഗ്ര", "Model", " Schatten", "keep", " done"};
  const std::string expected = "Hello കോണ്\u200dഗ്രModel Schattenkeep done";
  EXPECT_EQ(screen_after(40, 10, joins_after_zwj, chunks, "frame row\n[status]"), expected);
  EXPECT_EQ(screen_after(40, 10, engine_widths, chunks, "frame row\n[status]"), expected);
}

TEST(LiveRegion, FramesAtTheBottomOfTheScreenScrollWithoutLosingText) {
  // Permanent text that wraps and has line breaks, on a 5-row screen, with
  // a 3-row frame: every reservation scrolls the screen. What stays is what
  // a tall screen shows for the text alone.
  std::vector<std::string> chunks;
  std::string expected;
  for (int k = 0; k < 12; ++k) {
    chunks.push_back("word" + std::to_string(k) + (k % 4 == 3 ? "\n" : " "));
    expected += chunks.back();
  }
  expected.erase(expected.find_last_not_of(" \n") + 1);
  EXPECT_EQ(screen_after(16, 5, engine_widths, chunks, "a\nb\n[status]"), [&] {
    testing::VtScreen plain(16, 100, engine_widths);
    plain.feed(expected);
    return plain.text();
  }());
}

TEST(LiveRegion, AFrameTallerThanTheScreenKeepsItsFirstRowsAndItsStatus) {
  testing::VtScreen screen(20, 5, engine_widths);
  screen.feed(run_region(
      20,
      [](LiveRegion& r) {
        r.print("text");
        r.draw("r1\nr2\nr3\nr4\nr5\nr6\n[status]");
      },
      5));
  // 4 rows below the text's row: r1, r2, r3 and the status.
  EXPECT_EQ(screen.text(), "text\nr1\nr2\nr3\n[status]");
  screen.feed(
      "\x1b"
      "8\x1b[J");
  EXPECT_EQ(screen.text(), "text");
}

}  // namespace
}  // namespace dgemma::cli

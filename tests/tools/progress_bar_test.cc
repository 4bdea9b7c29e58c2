// The load/quantize progress bar: its text for given progress and width, the
// delay and rate limit (with an injected clock), how it ends its line, and
// that it writes nothing to a stream that is not a terminal.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "progress_bar.h"

namespace dgemma::cli {
namespace {

// Everything written to a temporary file.
std::string contents(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += char(c);
  return s;
}

TEST(ProgressLine, WeightsWithBar) {
  EXPECT_EQ(progress_line("loading", 45, 100, 3.2, ProgressUnit::kWeights, "", 80),
            "loading [#############.................]  45.0%  45/100 weights  3s");
  EXPECT_EQ(progress_line("loading", 1160000000, 2580000000, 75, ProgressUnit::kWeights, "", 100),
            "loading [#############.................]  45.0%  1.16G/2.58G weights  1m15s");
  EXPECT_EQ(progress_line("loading", 2500000, 5000000, 0, ProgressUnit::kWeights, "", 100),
            "loading [###############...............]  50.0%  2.5M/5.0M weights  0s");
}

TEST(ProgressLine, BytesWithItemShortenedFromTheLeft) {
  const std::string item = "model.language_model.layers.29.experts.gate_up_proj";
  const std::string wide =
      progress_line("quantize", uint64_t(3) << 30, uint64_t(12) << 30, 9, ProgressUnit::kBytes, item, 200);
  EXPECT_EQ(wide, "quantize [#######.......................]  25.0%  3.00/12.00 GiB  9s  " + item);
  const std::string narrow =
      progress_line("quantize", uint64_t(3) << 30, uint64_t(12) << 30, 9, ProgressUnit::kBytes, item, 90);
  EXPECT_EQ(narrow.size(), 89u);  // the last column stays free
  EXPECT_EQ(narrow.substr(narrow.size() - 21), "  ..." + item.substr(item.size() - 16));
  EXPECT_EQ(progress_line("quantize", 1 << 20, 4 << 20, 0, ProgressUnit::kBytes, "", 80),
            "quantize [#######.......................]  25.0%  1.0/4.0 MiB  0s");
}

TEST(ProgressLine, NarrowTerminalsShrinkThenDropTheBar) {
  const std::string l = progress_line("loading", 1, 2, 0, ProgressUnit::kWeights, "name", 50);
  EXPECT_LE(l.size(), 49u);
  EXPECT_NE(l.find("[##"), std::string::npos);   // a narrower bar
  EXPECT_EQ(l.find("name"), std::string::npos);  // no room for the item
  const std::string n = progress_line("loading", 1, 2, 0, ProgressUnit::kWeights, "", 40);
  EXPECT_EQ(n, "loading  50.0%  1/2 weights  0s");  // no bar below 10 cells
  EXPECT_LE(progress_line("loading", 1, 2, 0, ProgressUnit::kWeights, "", 10).size(), 9u);
}

TEST(ProgressLine, EdgeCases) {
  // Nothing to do counts as done; done past the total is clamped.
  EXPECT_NE(progress_line("x", 0, 0, 0, ProgressUnit::kWeights, "", 80).find("100.0%"), std::string::npos);
  EXPECT_NE(progress_line("x", 7, 5, 0, ProgressUnit::kWeights, "", 80).find("100.0%  5/5"), std::string::npos);
  // Control characters in a name cannot move the cursor.
  EXPECT_NE(progress_line("x", 1, 2, 0, ProgressUnit::kWeights, "a\rb\x1b", 80).find("a?b?"), std::string::npos);
}

// A bar on a temporary file (forced to draw as on a terminal) with a clock
// the test moves.
struct FakeTerminal {
  FILE* f = std::tmpfile();
  double now = 100;
  ~FakeTerminal() { std::fclose(f); }
  ProgressBarOptions options(bool keep = false) {
    ProgressBarOptions o;
    o.force_tty = true;
    o.columns = 80;
    o.keep = keep;
    o.clock = [this] { return now; };
    return o;
  }
};

TEST(ProgressBar, WaitsForTheDelayThenRateLimits) {
  FakeTerminal t;
  {
    ProgressBar bar(t.f, t.options());
    bar.update(1, 10);
    t.now += 0.4;
    bar.update(2, 10);
    EXPECT_EQ(contents(t.f), "");  // a load under 0.5 s shows nothing
    t.now += 0.2;
    bar.update(3, 10);
    std::string s = contents(t.f);
    EXPECT_EQ(s, std::string("\r") + progress_line("loading", 3, 10, 0.6, ProgressUnit::kWeights, "", 80));
    t.now += 0.05;
    bar.update(4, 10);
    EXPECT_EQ(contents(t.f), s);  // within 0.1 s of the last draw
    t.now += 0.15;
    bar.update(5, 10);
    EXPECT_NE(contents(t.f).find("50.0%"), std::string::npos);
  }
  // The destructor erased the line: carriage return, blanks, carriage return.
  const std::string s = contents(t.f);
  const size_t width = progress_line("loading", 5, 10, 0.8, ProgressUnit::kWeights, "", 80).size();
  EXPECT_EQ(s.substr(s.size() - width - 2), std::string("\r") + std::string(width, ' ') + "\r");
}

TEST(ProgressBar, FastLoadWritesNothingAtAll) {
  FakeTerminal t;
  ProgressBar bar(t.f, t.options());
  for (int i = 1; i <= 10; ++i) bar.update(uint64_t(i), 10);
  bar.finish();
  EXPECT_EQ(contents(t.f), "");
}

TEST(ProgressBar, KeepRedrawsTheFinalStateAndEndsTheLine) {
  FakeTerminal t;
  ProgressBarOptions o = t.options(true);
  o.delay_s = 0;
  o.label = "quantize";
  o.unit = ProgressUnit::kBytes;
  ProgressBar bar(t.f, o);
  bar.update(1 << 20, 2 << 20, "a.weight");
  bar.update(2 << 20, 2 << 20, "b.weight");  // rate-limited, drawn by finish()
  bar.finish();
  bar.finish();                              // idempotent
  bar.update(2 << 20, 2 << 20, "c.weight");  // a finished bar stays quiet
  const std::string s = contents(t.f);
  EXPECT_EQ(s, std::string("\r") +
                   progress_line("quantize", 1 << 20, 2 << 20, 0, ProgressUnit::kBytes, "a.weight", 80) + "\r" +
                   progress_line("quantize", 2 << 20, 2 << 20, 0, ProgressUnit::kBytes, "b.weight", 80) + "\n");
}

TEST(ProgressBar, ShorterRedrawBlanksTheRest) {
  FakeTerminal t;
  ProgressBarOptions o = t.options();
  o.delay_s = 0;
  ProgressBar bar(t.f, o);
  bar.update(1, 2, "a_long_tensor_name");
  t.now += 1;
  bar.update(2, 2);
  const std::string first = progress_line("loading", 1, 2, 0, ProgressUnit::kWeights, "a_long_tensor_name", 80);
  const std::string second = progress_line("loading", 2, 2, 1, ProgressUnit::kWeights, "", 80);
  EXPECT_EQ(contents(t.f), "\r" + first + "\r" + second + std::string(first.size() - second.size(), ' '));
}

TEST(ProgressBar, NothingOnANonTerminalOrWhenDisabled) {
  FILE* f = std::tmpfile();  // not a terminal
  {
    ProgressBarOptions o;
    o.delay_s = 0;
    o.interval_s = 0;
    o.keep = true;
    ProgressBar bar(f, o);
    EXPECT_FALSE(bar.active());
    for (int i = 1; i <= 5; ++i) bar.update(uint64_t(i), 5, "t");
  }
  {
    ProgressBarOptions o;
    o.force_tty = true;
    o.enabled = false;  // --no-progress
    o.delay_s = 0;
    ProgressBar bar(f, o);
    EXPECT_FALSE(bar.active());
    bar.update(1, 1);
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

}  // namespace
}  // namespace dgemma::cli

#include "progress_bar.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "terminal.h"

namespace dgemma::cli {
namespace {

std::string format(const char* fmt, double a, double b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

// "1.16/2.58 GiB" or "1.16G/2.58G weights": both in the unit of the total.
std::string amounts(uint64_t done, uint64_t total, ProgressUnit unit) {
  const double d = double(done), t = double(total);
  if (unit == ProgressUnit::kBytes) {
    if (total >= (uint64_t(1) << 30)) return format("%.2f/%.2f GiB", d / double(1 << 30), t / double(1 << 30));
    return format("%.1f/%.1f MiB", d / double(1 << 20), t / double(1 << 20));
  }
  if (total >= 1000000000) return format("%.2fG/%.2fG weights", d / 1e9, t / 1e9);
  if (total >= 1000000) return format("%.1fM/%.1fM weights", d / 1e6, t / 1e6);
  if (total >= 1000) return format("%.1fk/%.1fk weights", d / 1e3, t / 1e3);
  return format("%.0f/%.0f weights", d, t);
}

std::string elapsed(double seconds) {
  const long s = long(std::max(0.0, seconds));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// One column per byte: anything but printable ASCII becomes '?'.
std::string printable(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c < 0x20 || c > 0x7e) c = '?';
  return r;
}

}  // namespace

std::string progress_line(std::string_view label, uint64_t done, uint64_t total, double seconds, ProgressUnit unit,
                          std::string_view item, int columns) {
  done = std::min(done, total);
  const double f = total ? double(done) / double(total) : 1.0;
  char pct[16];
  std::snprintf(pct, sizeof pct, "%5.1f%%", 100.0 * f);
  const std::string tail = std::string(pct) + "  " + amounts(done, total, unit) + "  " + elapsed(seconds);
  const size_t avail = size_t(std::max(columns - 1, 1));
  std::string head = printable(label);
  // Bar of up to 30 cells, narrower to fit, left out below 10.
  const size_t fixed = head.size() + 4 + tail.size();  // " [" "] "
  const size_t cells = fixed + 30 <= avail ? 30 : avail > fixed ? avail - fixed : 0;
  std::string line = head;
  if (cells >= 10) {
    const size_t fill = size_t(f * double(cells));
    line += " [" + std::string(fill, '#') + std::string(cells - fill, '.') + "] ";
  } else {
    line += " ";
  }
  line += tail;
  // The item in what is left, as "...suffix" when long (tensor names differ
  // at their end); left out when fewer than 8 columns remain.
  if (!item.empty() && line.size() + 2 + 8 <= avail) {
    std::string name = printable(item);
    const size_t room = avail - line.size() - 2;
    if (name.size() > room) name = "..." + name.substr(name.size() - (room - 3));
    line += "  " + name;
  }
  if (line.size() > avail) line.resize(avail);
  return line;
}

ProgressBar::ProgressBar(FILE* out, ProgressBarOptions options)
    : out_(out), o_(std::move(options)), active_(o_.enabled && (o_.force_tty || is_tty(out))) {
  if (!o_.clock)
    o_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  if (o_.columns <= 0) o_.columns = active_ ? terminal_columns(out) : 80;
  start_ = o_.clock();
}

void ProgressBar::update(uint64_t done, uint64_t total, std::string_view item) {
  if (!active_) return;
  done_ = done;
  total_ = total;
  item_.assign(item);
  dirty_ = true;
  const double now = o_.clock();
  if (now - start_ < o_.delay_s) return;                   // not (yet) a noticeable wait
  if (drawn_ && now - last_draw_ < o_.interval_s) return;  // rate limit
  draw(now);
}

void ProgressBar::draw(double now) {
  const std::string line = progress_line(o_.label, done_, total_, now - start_, o_.unit, item_, o_.columns);
  // Overwrite the previous text; spaces clear what a longer one left.
  std::string text(1, '\r');
  text += line;
  if (drawn_width_ > line.size()) text.append(drawn_width_ - line.size(), ' ');
  std::fputs(text.c_str(), out_);
  std::fflush(out_);
  drawn_width_ = std::max(drawn_width_, line.size());
  drawn_ = true;
  dirty_ = false;
  last_draw_ = now;
}

void ProgressBar::finish() {
  if (drawn_) {
    if (o_.keep) {
      if (dirty_) draw(o_.clock());
      std::fputc('\n', out_);
    } else {
      std::string blank(drawn_width_ + 2, ' ');  // "\r", blanks over the bar, "\r"
      blank.front() = blank.back() = '\r';
      std::fputs(blank.c_str(), out_);
    }
    std::fflush(out_);
  }
  drawn_ = false;
  active_ = false;  // a finished bar stays quiet
}

}  // namespace dgemma::cli

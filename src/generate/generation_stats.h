#pragma once
// Timing and size figures of one generate() run, for the CLI summary and the
// `done` event: a GenerationObserver that timestamps canvas commits, plus the
// process's peak memory. Formatting only builds strings; printing is the
// caller's job.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "generate/generate.h"

namespace dgemma {

struct GenerationStats {
  int64_t prompt_tokens = 0;  // tokens encoded for this run (new, uncached)
  int64_t reused_tokens = 0;  // cached positions reused from earlier turns
  int64_t canvas_length = 0;
  int64_t canvases = 0;
  std::vector<int64_t> steps_per_canvas;
  std::vector<float> halt_entropy;  // GenerationResult::halt_entropy
  std::vector<bool> converged;      // GenerationResult::converged
  int64_t decoder_forwards = 0;
  int64_t emitted_tokens = 0;       // tokens shown (before EOS, within -n)
  double seconds = 0;               // whole generate() call, prefill included
  double first_token_seconds = -1;  // until the first canvas committed; < 0: none
  int64_t peak_rss_bytes = 0;       // getrusage ru_maxrss
  std::string stop_reason;          // "eos", "length", "cancelled"

  double positions_per_second() const;  // decoder canvas positions / s
  double tokens_per_second() const;     // emitted tokens / s
};

// Peak resident set size of this process so far (0 if unknown).
int64_t peak_rss_bytes();

// A few aligned "name  value" lines (no trailing newline). When a canvas ran
// out of steps without converging, a "not converged" line says so (the
// trajectory alarm of docs/placement.md, requirement 9).
std::string format_summary(const GenerationStats& stats);

// Measures a run: call start() right before generate(); forwards nothing.
class StatsClock {
 public:
  void start() {
    t0_ = std::chrono::steady_clock::now();
    first_ = -1;
  }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  // Call from on_canvas; remembers the first commit.
  void on_canvas() {
    if (first_ < 0) first_ = elapsed();
  }
  double first_canvas_seconds() const { return first_; }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  double first_ = -1;
};

// Fills the figures that come from the result and the clock.
GenerationStats collect_stats(const GenerationResult& result, int64_t canvas_length, const StatsClock& clock,
                              int64_t emitted_tokens, const std::string& stop_reason);

}  // namespace dgemma

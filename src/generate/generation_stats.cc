#include "generate/generation_stats.h"

#include <sys/resource.h>

#include <cstdio>

namespace dgemma {

double GenerationStats::positions_per_second() const {
  return seconds > 0 ? double(decoder_forwards * canvas_length) / seconds : 0.0;
}

double GenerationStats::tokens_per_second() const { return seconds > 0 ? double(emitted_tokens) / seconds : 0.0; }

int64_t peak_rss_bytes() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
#ifdef __APPLE__
  return int64_t(u.ru_maxrss);  // bytes on macOS
#else
  return int64_t(u.ru_maxrss) * 1024;  // kilobytes on Linux
#endif
}

GenerationStats collect_stats(const GenerationResult& result, int64_t canvas_length, const StatsClock& clock,
                              int64_t emitted_tokens, const std::string& stop_reason) {
  GenerationStats s;
  s.prompt_tokens = result.prompt_length;
  s.canvas_length = canvas_length;
  s.canvases = int64_t(result.steps_per_canvas.size());
  s.steps_per_canvas = result.steps_per_canvas;
  s.halt_entropy = result.halt_entropy;
  s.converged = result.converged;
  s.decoder_forwards = result.decoder_forwards;
  s.emitted_tokens = emitted_tokens;
  s.seconds = clock.elapsed();
  s.first_token_seconds = clock.first_canvas_seconds();
  s.peak_rss_bytes = peak_rss_bytes();
  s.stop_reason = stop_reason;
  return s;
}

std::string format_summary(const GenerationStats& s) {
  std::string steps;
  for (size_t i = 0; i < s.steps_per_canvas.size(); ++i) {
    if (i) steps += ' ';
    steps += std::to_string(s.steps_per_canvas[i]);
  }
  char buf[1024];
  std::string first = s.first_token_seconds < 0 ? std::string("-") : [&] {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f s", s.first_token_seconds);
    return std::string(b);
  }();
  std::snprintf(
      buf, sizeof buf,
      "prompt tokens     %lld%s\n"
      "canvases          %lld x %lld positions, steps per canvas: %s\n"
      "decoder passes    %lld (%.1f canvas positions/s)\n"
      "generated tokens  %lld (%.2f tokens/s, stop: %s)\n"
      "first token       %s (first committed canvas)\n"
      "total time        %.2f s\n"
      "peak memory       %.1f MiB (ru_maxrss)",
      (long long)s.prompt_tokens,
      s.reused_tokens > 0 ? (" new, " + std::to_string(s.reused_tokens) + " reused from the cache").c_str() : "",
      (long long)s.canvases, (long long)s.canvas_length, steps.empty() ? "-" : steps.c_str(),
      (long long)s.decoder_forwards, s.positions_per_second(), (long long)s.emitted_tokens, s.tokens_per_second(),
      s.stop_reason.c_str(), first.c_str(), s.seconds, double(s.peak_rss_bytes) / (1024.0 * 1024.0));
  std::string text = buf;
  if (!s.halt_entropy.empty()) {
    text += "\nhalt entropy     ";
    for (float h : s.halt_entropy) {
      char b[32];
      std::snprintf(b, sizeof b, " %.4g", double(h));
      text += b;
    }
    text += " (mean entropy per canvas at its last step)";
  }
  std::string unconverged;
  size_t count = 0;
  for (size_t i = 0; i < s.converged.size(); ++i) {
    if (s.converged[i]) continue;
    unconverged += (count++ ? ", " : "") + std::to_string(i);
  }
  if (count > 0)
    text += "\nnot converged     canvas" + std::string(count > 1 ? "es " : " ") + unconverged +
            " ran out of denoising steps before the stop condition (argmax stable, low entropy): expected of "
            "random weights; with a real model a sign of wrong numerics (compare backends with `dgemma doctor`)";
  return text;
}

}  // namespace dgemma

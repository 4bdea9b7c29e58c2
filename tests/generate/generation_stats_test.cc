// The CLI summary of a run (generate/generation_stats.h): the figures, the
// halt entropy per canvas, and the "not converged" alarm line only for
// canvases that ran out of steps.
#include <gtest/gtest.h>

#include <string>

#include "generate/generation_stats.h"

namespace dgemma {
namespace {

GenerationStats stats(std::vector<bool> converged) {
  GenerationStats s;
  s.prompt_tokens = 12;
  s.canvas_length = 256;
  s.canvases = int64_t(converged.size());
  for (size_t i = 0; i < converged.size(); ++i) {
    s.steps_per_canvas.push_back(converged[i] ? 9 : 48);
    s.halt_entropy.push_back(converged[i] ? 0.0031f : 0.44f);
  }
  s.converged = std::move(converged);
  s.decoder_forwards = 9 + 48;
  s.emitted_tokens = 300;
  s.seconds = 2.0;
  s.stop_reason = "length";
  return s;
}

TEST(GenerationStats, SummaryNamesTheCanvasesThatDidNotConverge) {
  const std::string text = format_summary(stats({true, false, false}));
  EXPECT_NE(text.find("canvases          3 x 256 positions, steps per canvas: 9 48 48"), std::string::npos) << text;
  EXPECT_NE(text.find("halt entropy      0.0031 0.44 0.44 (mean entropy per canvas at its last step)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("not converged     canvases 1, 2 ran out of denoising steps"), std::string::npos) << text;
  EXPECT_NE(format_summary(stats({false})).find("not converged     canvas 0 ran out"), std::string::npos);
}

TEST(GenerationStats, NoAlarmWhenEveryCanvasConverged) {
  const std::string text = format_summary(stats({true, true}));
  EXPECT_NE(text.find("halt entropy      0.0031 0.0031"), std::string::npos) << text;
  EXPECT_EQ(text.find("not converged"), std::string::npos) << text;
  // No canvas at all (a cancelled run): neither line.
  const std::string none = format_summary(stats({}));
  EXPECT_EQ(none.find("halt entropy"), std::string::npos) << none;
  EXPECT_EQ(none.find("not converged"), std::string::npos) << none;
}

}  // namespace
}  // namespace dgemma

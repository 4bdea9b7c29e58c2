// CLI helpers: "did you mean", token id lists as `tokenize` prints them,
// the context-size check, --temp/--seed, and the line editor's buffer.
#include <gtest/gtest.h>

#include <limits>

#include "flags.h"
#include "generation_flags.h"
#include "line_editor.h"
#include "suggest.h"

namespace dgemma::cli {
namespace {

TEST(Suggest, ClosestOptionOrCommand) {
  const std::vector<std::string> flags = {"--max-new-tokens", "--seed", "--temp", "--ctx-size", "-n", "-p"};
  EXPECT_EQ(closest_match("--sed", flags), "--seed");
  EXPECT_EQ(closest_match("--tmep", flags), "--temp");  // a swap counts once
  EXPECT_EQ(closest_match("--max-new-token", flags), "--max-new-tokens");
  EXPECT_EQ(closest_match("--ctx", flags), "--ctx-size");  // unique prefix
  EXPECT_EQ(closest_match("--zzzzzz", flags), "");
  EXPECT_EQ(closest_match("-x", flags), "");  // too short to guess
  EXPECT_EQ(closest_match("chta", {"chat", "run", "serve"}), "chat");
  EXPECT_EQ(did_you_mean("rnu", {"chat", "run"}), " (did you mean run?)");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(FlagParser, UnknownOptionIsAUsageErrorWithASuggestion) {
  int64_t seed = 0;
  FlagParser p("t", "t");
  p.add_int("-s,--seed", &seed, "seed");
  try {
    p.parse({"--sed", "1"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean --seed?"), std::string::npos) << e.what();
  }
  EXPECT_THROW(p.parse({"--seed"}), UsageError);       // missing value
  EXPECT_THROW(p.parse({"--seed", "x"}), UsageError);  // bad value
}

// Values out of a flag's range or outside its choices are usage errors
// (exit 2) naming the flag, whether the parser or a lower layer checks them.
TEST(FlagParser, RangesAndChoicesAreUsageErrors) {
  int64_t threads = 0, steps = 8;
  std::string precision = "fp32";
  FlagParser p("t", "t");
  p.add_int("-t,--threads", &threads, "threads", 0);
  p.add_int("--steps", &steps, "steps", 1, 1000);
  p.add_choice("--precision", &precision, "fp32 or bf16", {"fp32", "bf16"});
  auto message = [&](const Args& args) -> std::string {
    try {
      p.parse(args);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(no usage error)";
  };
  EXPECT_EQ(message({"--threads", "-1"}), "option --threads: expected an integer >= 0, got -1");
  EXPECT_EQ(message({"--steps", "0"}), "option --steps: expected an integer in [1, 1000], got 0");
  EXPECT_EQ(message({"--steps=1001"}), "option --steps: expected an integer in [1, 1000], got 1001");
  EXPECT_EQ(message({"--precision", "bf17"}),
            "option --precision: expected fp32 or bf16, got 'bf17' (did you mean bf16?)");
  ASSERT_TRUE(p.parse({"-t", "0", "--steps", "1000", "--precision", "bf16"}));  // the bounds are inside
  EXPECT_EQ(threads, 0);
  EXPECT_EQ(steps, 1000);
  EXPECT_EQ(precision, "bf16");
  EXPECT_EQ(choice_list({"a", "b", "c"}), "a, b or c");
}

TEST(FlagParser, ALowerLayersErrorAboutAValueBecomesAUsageError) {
  try {
    parse_flag_value("--strategy", []() -> int { throw Error("unknown placement strategy 'nope'"); });
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "option --strategy: unknown placement strategy 'nope'");
  }
  EXPECT_EQ(parse_flag_value("--x", [] { return 3; }), 3);
}

// -n and --max-denoising-steps come from generation_config.json unless given;
// a given value that the file would not allow is the user's mistake.
TEST(GenerationFlags, BadValuesAreUsageErrors) {
  const std::string no_model = ::testing::TempDir() + "/no-generation-config";
  using Field = std::string GenerationFlags::*;
  const std::vector<std::vector<std::pair<Field, std::string>>> cases = {
      {{&GenerationFlags::max_new_tokens, "0"}},
      {{&GenerationFlags::max_denoising_steps, "0"}},
      {{&GenerationFlags::stability_threshold, "-1"}},
      {{&GenerationFlags::entropy_bound, "0"}},
      {{&GenerationFlags::t_min, "0.5"}, {&GenerationFlags::t_max, "0.1"}},  // t_max must exceed t_min
  };
  for (const auto& flags : cases) {
    GenerationFlags f;
    for (const auto& [field, value] : flags) f.*field = value;
    EXPECT_THROW(f.resolve(no_model, /*quiet=*/true), UsageError) << flags[0].second;
  }
  GenerationFlags f;
  f.max_new_tokens = "0";
  try {
    f.resolve(no_model, true);
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "option -n/--max-new-tokens: expected an integer >= 1, got 0");
  }
  f.max_new_tokens = "1";
  EXPECT_EQ(f.resolve(no_model, true).max_new_tokens, 1);
}

TEST(ParseTokenIds, AcceptsWhatTokenizePrints) {
  const std::vector<int32_t> want = {2, 427, 5};
  EXPECT_EQ(parse_token_ids("2,427,5", "--prompt-ids"), want);
  EXPECT_EQ(parse_token_ids("2 427 5\n", "--prompt-ids"), want);    // `dgemma tokenize`
  EXPECT_EQ(parse_token_ids("[2, 427, 5]", "--prompt-ids"), want);  // JSON
  EXPECT_EQ(parse_token_ids(" 2,\n427 ,5 ", "--prompt-ids"), want);
  EXPECT_THROW(parse_token_ids("2,,5", "--prompt-ids"), UsageError);
  EXPECT_THROW(parse_token_ids("2 x 5", "--prompt-ids"), UsageError);
  EXPECT_THROW(parse_token_ids("", "--prompt-ids"), UsageError);
  EXPECT_THROW(parse_token_ids("[]", "--prompt-ids"), UsageError);
  EXPECT_THROW(parse_token_ids("-1", "--prompt-ids"), UsageError);
}

TEST(ContextCheck, NamesTheLimitAndTheLargestNThatFits) {
  GenerationConfig c;
  c.max_new_tokens = 3000000;
  c.context_size = 131072;
  try {
    check_context_fits(c, 14, 0, 256);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("context size 131072 (-c/--ctx-size)"), std::string::npos) << m;
    EXPECT_NE(m.find("at most -n 130816"), std::string::npos) << m;  // (131072 - 14) / 256 canvases
  }
  c.max_new_tokens = 130816;
  EXPECT_NO_THROW(check_context_fits(c, 14, 0, 256));
  c.context_size = 0;  // no limit
  c.max_new_tokens = int64_t(1) << 62;
  EXPECT_NO_THROW(check_context_fits(c, 14, 0, 256));
  EXPECT_EQ(reply_positions(c.max_new_tokens, 256), int64_t(1) << 62);
  EXPECT_EQ(reply_positions(257, 256), 512);
  EXPECT_EQ(reply_positions(256, 256), 256);
  EXPECT_EQ(reply_positions(std::numeric_limits<int64_t>::max(), 3), std::numeric_limits<int64_t>::max());  // saturates
}

TEST(GenerationFlags, TempZeroIsGreedyWithSeedZero) {
  GenerationFlags f;
  f.temperature = "0";
  EXPECT_EQ(f.resolve_seed(), 0u);
  f.seed = 7;
  EXPECT_EQ(f.resolve_seed(), 7u);
}

TEST(EditBuffer, EditsByCodePoint) {
  EditBuffer b;
  b.insert("h\xC3\xA9llo");  // héllo
  b.left();
  b.left();
  b.left();
  b.left();  // after "h"... then before é
  EXPECT_EQ(b.cursor(), 1u);
  b.right();
  EXPECT_EQ(b.cursor(), 3u);  // over the two bytes of é
  b.backspace();
  EXPECT_EQ(b.text(), "hllo");
  b.end();
  b.insert(" world");
  b.kill_word();
  EXPECT_EQ(b.text(), "hllo ");
  b.home();
  b.erase();
  EXPECT_EQ(b.text(), "llo ");
  b.right();
  b.kill_to_end();
  EXPECT_EQ(b.text(), "l");
  b.kill_to_start();
  EXPECT_EQ(b.text(), "");
}

TEST(EditView, ScrollsSoThatTheCursorShows) {
  const EditView all = edit_view("> ", "hello", 5, 80);
  EXPECT_EQ(all.visible, "hello");
  EXPECT_EQ(all.cursor_column, 7);
  const std::string text(100, 'x');
  const EditView end = edit_view("> ", text, 100, 20);
  EXPECT_LE(int(end.visible.size()) + 2, 19);
  EXPECT_LE(end.cursor_column, 19);
  const EditView start = edit_view("> ", text, 0, 20);
  EXPECT_EQ(start.cursor_column, 2);
}

}  // namespace
}  // namespace dgemma::cli

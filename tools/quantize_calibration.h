#pragma once
// `dgemma quantize --calibrate FILE | --calibrate-ids FILE`: the flags of PTQ
// calibration, the calibration set they name, and the calibration run over
// the input checkpoint (docs/formats.md §3.5).
#include <cstdint>
#include <optional>
#include <string>

#include "flags.h"
#include "quantize/expert_activation_ranges.h"

namespace dgemma::cli {

struct CalibrationFlags {
  std::string texts;  // --calibrate
  std::string ids;    // --calibrate-ids
  std::string tokenizer;
  bool chat = false;
  int64_t samples = 512, seq_len = 512, seed = 0, threads = 0;
  std::string passes = "both", states = "auto", precision = "fp32", input_scales = "layer";

  void add_to(FlagParser& p);
  bool wanted() const { return !texts.empty() || !ids.empty(); }
  // Checks that the flags agree with each other (usage errors).
  void check() const;
};

// Runs the calibration of `in_dir`'s routed experts on the set the flags
// name; hidden states that go to disk go to a scratch file in `scratch_dir`;
// progress on stderr unless `quiet`.
ExpertActivationRanges run_calibration(const std::string& in_dir, const std::string& scratch_dir,
                                       const CalibrationFlags& flags, bool quiet);

}  // namespace dgemma::cli

// The calibration set (calibrate/calibration_samples.h): sample files read as
// texts or ids, with errors naming file and line; cutting to count and
// length; the record's SHA-256 and the decoder canvases against values
// computed independently (Python's hashlib, and splitmix64's published first
// output 0xe220a8397b1dcdaf for state 0).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "calibrate/calibration_samples.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

using Ids = std::vector<std::vector<int32_t>>;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CalibrationSamples, TextsOnePerLineSkippingBlankOnes) {
  const std::vector<std::string> t = read_calibration_texts("first line\n\n  \r\nsecond {x}\r\nthird", "s.txt");
  EXPECT_EQ(t, (std::vector<std::string>{"first line", "second {x}", "third"}));
}

TEST(CalibrationSamples, TextsFromJsonLines) {
  const std::vector<std::string> t =
      read_calibration_texts("{\"text\": \"a\\nb\", \"id\": 3}\n\n{\"text\": \"c\"}\n", "s.jsonl");
  EXPECT_EQ(t, (std::vector<std::string>{"a\nb", "c"}));
}

TEST(CalibrationSamples, TextErrorsNameFileAndLine) {
  EXPECT_NE(error_of([] {
              read_calibration_texts("{\"text\": \"a\"}\n{\"body\": \"b\"}\n", "s.jsonl");
            }).find("s.jsonl:2: the object has no \"text\" field"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration_texts("{\"text\": 5}\n", "s.jsonl"); }).find("s.jsonl:1"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration_texts("{\"text\": \"a\"}\nnot json\n", "s.jsonl"); }).find("s.jsonl:2"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration_texts(" \n\n", "e.txt"); }).find("e.txt: no calibration samples"),
            std::string::npos);
}

TEST(CalibrationSamples, IdsInEverySpellingTokenizePrints) {
  const Ids ids = read_calibration_ids("2 17 45\n\n2, 9,3\n[4,5]\n{\"ids\": [6, 7], \"text\": \"x\"}\n", "i.txt", 100);
  EXPECT_EQ(ids, (Ids{{2, 17, 45}, {2, 9, 3}, {4, 5}, {6, 7}}));
}

TEST(CalibrationSamples, IdErrorsNameFileLineAndValue) {
  EXPECT_NE(error_of([] {
              read_calibration_ids("1 2\n3 100\n", "i.txt", 100);
            }).find("i.txt:2: token id 100 (item 2) is out of range [0, 100)"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration_ids("1 -4\n", "i.txt", 100); }).find("token id -4"), std::string::npos);
  EXPECT_NE(error_of([] { read_calibration_ids("1 2x\n", "i.txt", 100); }).find("i.txt:1: '2x' is not a token id"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration_ids("99999999999\n", "i.txt", 100); }).find("is not a token id"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration_ids("{\"ids\": [1, \"a\"]}\n", "i.txt", 100); }).find("i.txt:1"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_calibration_ids("{\"x\": 1}\n", "i.txt", 100); }).find("no \"ids\" field"),
            std::string::npos);
}

TEST(CalibrationSamples, FitCutsLengthTakesTheFirstNAndSkipsEmpty) {
  const Ids fitted = fit_calibration_samples({{}, {1, 2, 3, 4}, {5}, {6, 7}}, 2, 3, "f");
  EXPECT_EQ(fitted, (Ids{{1, 2, 3}, {5}}));
  EXPECT_NE(error_of([] {
              fit_calibration_samples({{}, {}}, 4, 4, "f.txt");
            }).find("every calibration sample is empty"),
            std::string::npos);
  EXPECT_NE(error_of([] { fit_calibration_samples({{1}}, 0, 4, "f"); }).find("at least 1"), std::string::npos);
}

TEST(CalibrationSamples, Sha256OfLengthsAndIds) {
  // hashlib.sha256 over struct.pack('<i', len) + struct.pack('<%di', *ids) per sample.
  EXPECT_EQ(calibration_set_sha256({{2, 17, 45}, {7}}),
            "75c4bfb410f9ca605f32ea7f07218442d56a8d2bd59bd17b09ab161f999a4653");
  EXPECT_EQ(calibration_set_sha256({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_NE(calibration_set_sha256({{2, 17}, {45, 7}}), calibration_set_sha256({{2, 17, 45}, {7}}));
}

TEST(CalibrationSamples, CanvasIsSplitmix64OfTheDocumentedCounter) {
  // splitmix64's first output for state 0 is 0xe220a8397b1dcdaf; mod 2^18 that is 118191.
  EXPECT_EQ(0xe220a8397b1dcdafull % 262144u, 118191u);
  EXPECT_EQ(calibration_canvas(0, 0, 6, 262144),
            (std::vector<int32_t>{118191, 154817, 218830, 102381, 232138, 115546}));
  EXPECT_EQ(calibration_canvas(3, 2, 5, 512), (std::vector<int32_t>{264, 496, 457, 115, 146}));
  EXPECT_NE(calibration_canvas(1, 0, 16, 512), calibration_canvas(0, 0, 16, 512));
}

}  // namespace
}  // namespace dgemma

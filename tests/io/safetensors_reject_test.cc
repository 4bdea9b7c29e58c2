// One test per rejection rule of docs/formats.md §1.5: each corrupt file is
// built from raw bytes and must fail with its own message naming the file.
#include <sys/stat.h>

#include "io/safetensors.h"
#include "st_test_util.h"

namespace dgemma {
namespace {

using test::expect_error;
using test::le64;
using test::st_image;

class SafetensorsReject : public ::testing::Test {
 protected:
  // Writes `image` as model.safetensors and expects opening it to fail with a
  // message that names the file and contains every needle.
  void expect_reject(const std::string& image, std::vector<std::string> needles) {
    const std::string path = dir_.file("model.safetensors");
    test::write_bytes(path, image);
    needles.push_back(path + ": ");
    expect_error([&] { SafetensorsFile::open(path); }, needles);
  }
  // One F32 tensor entry with the given fields.
  static std::string entry(const std::string& name, const std::string& body) {
    return "\"" + name + "\":{" + body + "}";
  }
  // "{" + s without operator+(const char*, std::string&&), whose
  // insert(0, ...) trips GCC 12's -Wrestrict false positive.
  static std::string brace(const std::string& s) {
    std::string out = "{";
    out += s;
    return out;
  }
  test::TempDir dir_;
};

// ---- length prefix and header framing ---------------------------------------

TEST_F(SafetensorsReject, EmptyFile) { expect_reject("", {"file is 0 bytes, shorter than the 8-byte"}); }

TEST_F(SafetensorsReject, FileShorterThanEightBytes) {
  expect_reject("abcde", {"file is 5 bytes, shorter than the 8-byte header length prefix"});
}

TEST_F(SafetensorsReject, HeaderLengthZero) { expect_reject(le64(0) + "xxxx", {"header length is 0"}); }

TEST_F(SafetensorsReject, HeaderLengthAboveLimit) {
  expect_reject(le64(100'000'001) + "{}", {"header length 100000001 exceeds the limit of 100000000 bytes"});
}

TEST_F(SafetensorsReject, HeaderLengthHugeDoesNotWrap) {
  expect_reject(le64(~uint64_t(0)) + "{}", {"exceeds the limit"});
}

TEST_F(SafetensorsReject, TruncatedHeader) {
  expect_reject(le64(100) + "{\"a\":", {"header length 100 runs past the end of the 13-byte file (truncated header)"});
}

TEST_F(SafetensorsReject, HeaderNotUtf8) {
  expect_reject(st_image("{\"a\xff\":1}     ", 0), {"header is not valid UTF-8"});
}

TEST_F(SafetensorsReject, HeaderNotJson) {
  expect_reject(st_image("{\"a\": tru}     ", 0), {"header: invalid JSON at line 1, column 7"});
}

TEST_F(SafetensorsReject, HeaderOnlyWhitespace) { expect_reject(st_image("        ", 0), {"header is empty"}); }

TEST_F(SafetensorsReject, TopLevelNotObject) {
  expect_reject(st_image("[1, 2]  ", 0), {"header top level is array, expected an object"});
}

TEST_F(SafetensorsReject, GarbageBeforeObject) {
  expect_reject(st_image(std::string("\0{}     ", 8), 0),
                {"non-whitespace byte 0x00 at header offset 0 before the JSON object"});
}

TEST_F(SafetensorsReject, NulPaddingAfterObject) {
  expect_reject(st_image(std::string("{}  \0\0\0\0", 8), 0),
                {"non-whitespace byte 0x00 at header offset 4 after the JSON object"});
}

TEST_F(SafetensorsReject, DuplicateTensorNames) {
  const std::string t = "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}";
  expect_reject(st_image("{\"a\":" + t + ",\"a\":" + t + "}", 1), {"duplicate key \"a\""});
}

// ---- __metadata__ -------------------------------------------------------------

TEST_F(SafetensorsReject, MetadataNotObject) {
  expect_reject(st_image("{\"__metadata__\":\"pt\"}", 0), {"__metadata__ is string, expected an object of strings"});
}

TEST_F(SafetensorsReject, MetadataValueNotString) {
  expect_reject(st_image("{\"__metadata__\":{\"format\":\"pt\",\"n\":3}}", 0),
                {"__metadata__ value for key \"n\" is number, expected a string"});
}

// ---- per-tensor fields --------------------------------------------------------

TEST_F(SafetensorsReject, TensorEntryNotObject) {
  expect_reject(st_image("{\"w\":[1,2]}", 0), {"tensor \"w\": entry is array, expected an object"});
}

TEST_F(SafetensorsReject, MissingDtype) {
  expect_reject(st_image(brace(entry("w", "\"shape\":[1],\"data_offsets\":[0,4]")) + "}", 4),
                {"tensor \"w\": missing field \"dtype\""});
}

TEST_F(SafetensorsReject, MissingShape) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"data_offsets\":[0,4]")) + "}", 4),
                {"tensor \"w\": missing field \"shape\""});
}

TEST_F(SafetensorsReject, MissingDataOffsets) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[1]")) + "}", 4),
                {"tensor \"w\": missing field \"data_offsets\""});
}

TEST_F(SafetensorsReject, ExtraField) {
  expect_reject(
      st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"stride\":[1]")) + "}", 4),
      {"tensor \"w\": unexpected field \"stride\""});
}

TEST_F(SafetensorsReject, UnknownDtype) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]")) + "}", 16),
                {"tensor \"w\": unknown dtype \"F128\""});
}

TEST_F(SafetensorsReject, DtypeNotString) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]")) + "}", 4),
                {"tensor \"w\": dtype is number, expected a string"});
}

TEST_F(SafetensorsReject, ShapeNotArray) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]")) + "}", 4),
                {"tensor \"w\": shape is number, expected an array"});
}

TEST_F(SafetensorsReject, ShapeNegative) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[-2,2],\"data_offsets\":[0,16]")) + "}", 16),
                {"tensor \"w\": shape[0] = -2 is negative"});
}

TEST_F(SafetensorsReject, ShapeFraction) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[2,2.5],\"data_offsets\":[0,20]")) + "}", 20),
                {"tensor \"w\": shape[1] is not an integer (got 2.5)"});
}

TEST_F(SafetensorsReject, ShapeString) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]")) + "}", 8),
                {"tensor \"w\": shape[0] is not an integer (got \"2\")"});
}

TEST_F(SafetensorsReject, ShapeAboveSchemaLimit) {
  // 2^48 + 1 elements of U8 would need a 256 TiB file; the limit hits first.
  expect_reject(
      st_image(brace(entry("w", "\"dtype\":\"U8\",\"shape\":[281474976710657],\"data_offsets\":[0,1]")) + "}", 1),
      {"tensor \"w\": shape[0] = 281474976710657 exceeds the limit 2^48"});
}

TEST_F(SafetensorsReject, ShapeBeyondInt64) {
  expect_reject(
      st_image(brace(entry("w", "\"dtype\":\"U8\",\"shape\":[99999999999999999999],\"data_offsets\":[0,1]")) + "}", 1),
      {"tensor \"w\": shape[0] = ", "is out of the 64-bit integer range"});
}

TEST_F(SafetensorsReject, ShapeProductOverflows) {
  expect_reject(st_image(brace(entry("w",
                                     "\"dtype\":\"U8\",\"shape\":[281474976710656,281474976710656],"
                                     "\"data_offsets\":[0,1]")) +
                             "}",
                         1),
                {"tensor \"w\": shape [281474976710656, 281474976710656] has an element count that overflows 64 bits"});
}

TEST_F(SafetensorsReject, ByteCountOverflows) {
  // 2^61 elements fit int64, but 2^61 x 64 bits does not fit in 64 bits.
  expect_reject(st_image(brace(entry("w",
                                     "\"dtype\":\"F64\",\"shape\":[8192,281474976710656],"
                                     "\"data_offsets\":[0,1]")) +
                             "}",
                         1),
                {"tensor \"w\": shape [8192, 281474976710656] x F64 overflows 64 bits"});
}

TEST_F(SafetensorsReject, DataOffsetsNotTwoEntries) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]")) + "}", 4),
                {"tensor \"w\": data_offsets must be exactly two non-negative integers [begin, end], got [0, 4, 8]"});
}

TEST_F(SafetensorsReject, DataOffsetsNotArray) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":\"0-4\"")) + "}", 4),
                {"tensor \"w\": data_offsets must be exactly two non-negative integers"});
}

TEST_F(SafetensorsReject, DataOffsetsNotInteger) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]")) + "}", 4),
                {"tensor \"w\": data_offsets[1] is not an integer (got 4.0)"});
}

TEST_F(SafetensorsReject, DataOffsetsNegative) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]")) + "}", 4),
                {"tensor \"w\": data_offsets[0] = -4 is negative"});
}

TEST_F(SafetensorsReject, BeginAfterEnd) {
  expect_reject(st_image(brace(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]")) + "}", 8),
                {"tensor \"w\": data_offsets begin 8 > end 4"});
}

TEST_F(SafetensorsReject, ByteSizeMismatch) {
  expect_reject(
      st_image(brace(entry("a.weight", "\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]")) + "}", 12),
      {"model.safetensors: tensor \"a.weight\": byte size 12 does not match shape [2, 2] x F32 = 16"});
}

TEST_F(SafetensorsReject, SubByteNotWholeBytes) {
  expect_reject(st_image(brace(entry("q", "\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]")) + "}", 2),
                {"tensor \"q\": shape [3] x F4 = 12 bits is not a whole number of bytes"});
}

// ---- layout of the data buffer -------------------------------------------------

TEST_F(SafetensorsReject, OffsetsOverlap) {
  expect_reject(st_image(brace(entry("a", "\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]")) + "," +
                             entry("b", "\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]") + "}",
                         12),
                {"tensor \"b\": data_offsets [4, 12] overlap tensor \"a\" [0, 8]"});
}

TEST_F(SafetensorsReject, EmptyTensorInsideAnother) {
  expect_reject(st_image(brace(entry("a", "\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]")) + "," +
                             entry("e", "\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]") + "}",
                         8),
                {"tensor \"e\": data_offsets [4, 4] overlap tensor \"a\""});
}

TEST_F(SafetensorsReject, OffsetsLeaveGap) {
  expect_reject(st_image(brace(entry("a", "\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]")) + "," +
                             entry("b", "\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[12,16]") + "}",
                         16),
                {"gap of 4 bytes between tensor \"a\" (ends at 8) and tensor \"b\" (begins at 12)"});
}

TEST_F(SafetensorsReject, OffsetsDoNotStartAtZero) {
  expect_reject(st_image(brace(entry("a", "\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]")) + "}", 8),
                {"tensor \"a\": data starts at offset 4, but the first tensor must start at 0"});
}

TEST_F(SafetensorsReject, TruncatedData) {
  expect_reject(st_image(brace(entry("a", "\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]")) + "}", 10),
                {"tensors need 16 bytes of data but the file has only 10 after the header (truncated file)"});
}

TEST_F(SafetensorsReject, TrailingBytes) {
  expect_reject(st_image(brace(entry("a", "\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]")) + "}", 19),
                {"file has 3 trailing bytes after the last tensor (data buffer is 19 bytes, tensors end at 16)"});
}

TEST_F(SafetensorsReject, NoTensorsButData) { expect_reject(st_image("{}      ", 4), {"file has 4 trailing bytes"}); }

// ---- the file itself -------------------------------------------------------------

TEST_F(SafetensorsReject, MissingFile) {
  const std::string path = dir_.file("absent.safetensors");
  expect_error([&] { SafetensorsFile::open(path); }, {"cannot open " + path, "No such file"});
}

TEST_F(SafetensorsReject, Directory) {
  expect_error([&] { SafetensorsFile::open(dir_.path()); }, {dir_.path() + ": not a regular file"});
}

// ---- what must still be accepted ---------------------------------------------------

TEST(SafetensorsAccept, LeadingWhitespaceAndTrailingSpaces) {
  const std::string header = " \t\r\n{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}   \n";
  const std::string image = st_image(header, "\x01\x02");
  auto h = parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "mem");
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.data_offset, 8 + header.size());
}

TEST(SafetensorsAccept, NoTensors) {
  const std::string image = st_image("{}      ", 0);
  auto h = parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "mem");
  EXPECT_TRUE(h.tensors.empty());
}

TEST(SafetensorsAccept, SubByteEmptyAndScalarTensorsAnyKeyOrder) {
  // Keys out of offset order, empty tensors sharing an offset, a 0-rank
  // scalar and a whole-byte F4 tensor are all legal (§1.1, §1.4).
  const std::string header =
      "{\"s\":{\"data_offsets\":[2,6],\"dtype\":\"F32\",\"shape\":[]},"
      "\"e1\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[2,2]},"
      "\"e2\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[2,2]},"
      "\"q\":{\"dtype\":\"F4\",\"shape\":[2,2],\"data_offsets\":[0,2]},"
      "\"__metadata__\":{\"format\":\"pt\"}}";
  const std::string image = st_image(header, 6);
  auto h = parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "mem");
  ASSERT_EQ(h.tensors.size(), 4u);
  EXPECT_EQ(h.tensors[0].name, "q");  // sorted by offset
  EXPECT_EQ(h.tensors.back().name, "s");
  EXPECT_EQ(h.tensors.back().numel(), 1);
  EXPECT_TRUE(h.tensors.back().shape.empty());
  ASSERT_EQ(h.metadata.size(), 1u);
  EXPECT_EQ(h.metadata[0].second, "pt");
}

TEST(SafetensorsAccept, MaxDimensionIsAllowed) {
  // A dimension of exactly 2^48 with a zero dimension beside it is legal.
  const std::string image =
      st_image("{\"z\":{\"dtype\":\"U8\",\"shape\":[281474976710656,0],\"data_offsets\":[0,0]}}", 0);
  auto h = parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "mem");
  EXPECT_EQ(h.tensors.at(0).numel(), 0);
}

}  // namespace
}  // namespace dgemma

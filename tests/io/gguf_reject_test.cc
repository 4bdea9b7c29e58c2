// One test per rejection rule of docs/formats.md §5.1: each bad file is
// built from raw bytes (gguf_test_bytes.h, not the writer) and must fail with
// a dgemma::Error naming the file and the key or tensor at fault.
#include "gguf_test_bytes.h"
#include "io/gguf.h"
#include "st_test_util.h"
#include "support/test_rng.h"

namespace dgemma {
namespace {

using test::expect_error;
using test::GgufBytes;
namespace id = test::gguf_id;

class GgufReject : public ::testing::Test {
 protected:
  // Parses the image in memory and through GgufFile::open; both must fail
  // with every needle and the file's name.
  void expect_reject(const GgufBytes& image, std::vector<std::string> needles) {
    needles.push_back("model.gguf: ");
    const auto* p = reinterpret_cast<const uint8_t*>(image.bytes.data());
    expect_error([&] { parse_gguf(p, image.size(), "model.gguf"); }, needles);
    const std::string path = dir_.file("model.gguf");
    test::write_bytes(path, image.bytes);
    needles.back() = path + ": ";
    expect_error([&] { GgufFile::open(path); }, needles);
  }
  // A file with the given keys (already encoded, `n_kv` of them) and no tensors.
  static GgufBytes keys_only(uint64_t n_kv, const GgufBytes& kvs) {
    GgufBytes b;
    b.header(0, n_kv).raw(kvs.bytes).pad();
    return b;
  }
  // A file with one key and the given descriptors (`n` of them), padded,
  // followed by `data` zero bytes.
  static GgufBytes with_tensors(uint64_t n, const GgufBytes& infos, uint64_t data) {
    GgufBytes b;
    b.header(n, 1).kv_string("general.architecture", "toy").raw(infos.bytes).pad().zeros(data);
    return b;
  }
  test::TempDir dir_;
};

// ---- magic and version --------------------------------------------------------

TEST_F(GgufReject, EmptyFile) { expect_reject(GgufBytes{}, {"header: file is 0 bytes, too short for the GGUF magic"}); }

TEST_F(GgufReject, WrongMagic) {
  GgufBytes b;
  b.raw("GGML").u32(3).u64(0).u64(0);
  expect_reject(b, {"header: magic 0x4c4d4747 is not 'GGUF' (not a GGUF file)"});
}

TEST_F(GgufReject, SafetensorsFileIsNotGguf) {
  GgufBytes b;
  b.u64(2).raw("{}");
  expect_reject(b, {"not a GGUF file"});
}

TEST_F(GgufReject, ShorterThanFixedHeader) {
  GgufBytes b;
  b.raw("GGUF").u32(3).u32(0);
  expect_reject(b, {"header: file is 12 bytes, shorter than the 24-byte GGUF header"});
}

TEST_F(GgufReject, VersionZero) {
  GgufBytes b;
  b.header(0, 0, 0);
  expect_reject(b, {"header: version 0 is not a GGUF version"});
}

TEST_F(GgufReject, VersionOne) {
  GgufBytes b;
  b.header(0, 0, 1);
  expect_reject(b, {"header: version 1 (32-bit counts) is not supported"});
}

TEST_F(GgufReject, VersionFour) {
  GgufBytes b;
  b.header(0, 0, 4);
  expect_reject(b, {"header: version 4 is newer than this reader"});
}

TEST_F(GgufReject, ByteSwappedVersionThree) {
  GgufBytes b;
  b.header(0, 0, 0x03000000);
  expect_reject(b, {"header: version 0x03000000 reads as byte-swapped: big-endian GGUF files are not supported"});
}

// ---- counts --------------------------------------------------------------------

TEST_F(GgufReject, AbsurdKeyCount) {
  GgufBytes b;
  b.header(0, uint64_t(1) << 60).pad();
  expect_reject(b, {"header: metadata_kv_count 1152921504606846976 cannot fit in a 32-byte file"});
}

TEST_F(GgufReject, AbsurdTensorCount) {
  GgufBytes b;
  b.header(~uint64_t(0), 0).pad();
  expect_reject(b, {"header: tensor_count 18446744073709551615 cannot fit in a 32-byte file"});
}

TEST_F(GgufReject, KeyCountTooLargeForTheRest) {
  // Two keys declared, one present: the second runs off the end.
  GgufBytes kvs;
  kvs.kv_string("a.b", "0123456789");
  GgufBytes b;
  b.header(0, 2).raw(kvs.bytes);
  expect_reject(b, {"header: key 2 of 2: key name length needs 8 bytes at offset 57 but the file ends after 0",
                    "(truncated file?)"});
}

// ---- keys --------------------------------------------------------------------

TEST_F(GgufReject, KeyNameLongerThanFile) {
  GgufBytes kvs;
  kvs.u64(1000).raw("abc").zeros(20);
  GgufBytes b;
  b.header(0, 1).raw(kvs.bytes);
  expect_reject(b, {"header: key 1 of 1: key name length 1000 runs past the end of the file"});
}

TEST_F(GgufReject, EmptyKeyName) {
  GgufBytes kvs;
  kvs.kv_u32("", 1);
  expect_reject(keys_only(1, kvs), {"header: key 1 of 1: the key name is empty"});
}

TEST_F(GgufReject, KeyNameOverLimit) {
  GgufBytes kvs;
  kvs.kv_u8(std::string(65536, 'k'), 1);
  expect_reject(keys_only(1, kvs), {"key 'kkkkkkkk", "...': the name is 65536 bytes, over the limit of 65535"});
}

TEST_F(GgufReject, DuplicateKey) {
  GgufBytes kvs;
  kvs.kv_u32("toy.block_count", 2).kv_string("general.name", "x").kv_u32("toy.block_count", 3);
  expect_reject(keys_only(3, kvs), {"key 'toy.block_count': appears twice (keys 1 and 3)"});
}

TEST_F(GgufReject, UnknownValueType) {
  GgufBytes kvs;
  kvs.kv_head("toy.x", 13).u32(0);
  expect_reject(keys_only(1, kvs), {"key 'toy.x': unknown value type 13"});
}

TEST_F(GgufReject, NestedArray) {
  GgufBytes kvs;
  kvs.kv_array("toy.nested", id::kArray, 1).u32(id::kU8).u64(1).u8(0);
  expect_reject(keys_only(1, kvs), {"key 'toy.nested': arrays of arrays are not supported"});
}

TEST_F(GgufReject, UnknownArrayElementType) {
  GgufBytes kvs;
  kvs.kv_array("toy.arr", 77, 1).u32(0);
  expect_reject(keys_only(1, kvs), {"key 'toy.arr': unknown array element type 77"});
}

TEST_F(GgufReject, StringValueLongerThanFile) {
  GgufBytes kvs;
  kvs.kv_head("general.name", id::kString).u64(uint64_t(1) << 62).raw("abc");
  GgufBytes b;
  b.header(0, 1).raw(kvs.bytes);
  expect_reject(b, {"key 'general.name': string value length 4611686018427387904 runs past the end of the file"});
}

TEST_F(GgufReject, ScalarValueCutOff) {
  GgufBytes kvs;
  kvs.kv_head("toy.block_count", id::kU64).u32(7);
  GgufBytes b;
  b.header(0, 1).raw(kvs.bytes);
  expect_reject(b, {"key 'toy.block_count': u64 value needs 8 bytes", "(truncated file?)"});
}

TEST_F(GgufReject, AbsurdArrayCount) {
  GgufBytes kvs;
  kvs.kv_array("tokenizer.ggml.scores", id::kF32, uint64_t(1) << 61).f32(0);
  expect_reject(
      keys_only(1, kvs),
      {"key 'tokenizer.ggml.scores': array of 2305843009213693952 f32 values needs at least", "bytes, but only"});
}

TEST_F(GgufReject, ArrayCountOverflowingBytes) {
  GgufBytes kvs;
  kvs.kv_array("toy.big", id::kU64, ~uint64_t(0));
  expect_reject(keys_only(1, kvs), {"key 'toy.big': array of 18446744073709551615 u64 values needs at least 2^64"});
}

TEST_F(GgufReject, StringArrayElementLongerThanFile) {
  GgufBytes kvs;
  kvs.kv_array("tokenizer.ggml.tokens", id::kString, 3).str("a").u64(1000).raw("bc");
  GgufBytes b;
  b.header(0, 1).raw(kvs.bytes).zeros(40);
  expect_reject(b, {"key 'tokenizer.ggml.tokens': element 1 (string) length 1000 runs past the end of the file"});
}

TEST_F(GgufReject, BoolScalarNotZeroOrOne) {
  GgufBytes kvs;
  kvs.kv_head("tokenizer.ggml.add_bos_token", id::kBool).u8(2);
  expect_reject(keys_only(1, kvs),
                {"key 'tokenizer.ggml.add_bos_token': bool value has byte value 2 (a bool must be 0 or 1)"});
}

TEST_F(GgufReject, BoolArrayElementNotZeroOrOne) {
  GgufBytes kvs;
  kvs.kv_array("toy.pattern", id::kBool, 3).u8(1).u8(0).u8(255);
  expect_reject(keys_only(1, kvs), {"key 'toy.pattern': element 2 (bool) has byte value 255 (a bool must be 0 or 1)"});
}

TEST_F(GgufReject, KeyNameWithControlBytesIsEscaped) {
  GgufBytes kvs;
  kvs.kv_u8("a\nb'c", 1).kv_u8("a\nb'c", 1);
  expect_reject(keys_only(2, kvs), {"key 'a\\x0ab\\x27c': appears twice"});
}

// ---- general.alignment ---------------------------------------------------------

TEST_F(GgufReject, AlignmentZero) {
  GgufBytes kvs;
  kvs.kv_u32("general.alignment", 0);
  expect_reject(keys_only(1, kvs), {"key 'general.alignment': alignment 0 is not a power of two"});
}

TEST_F(GgufReject, AlignmentThree) {
  GgufBytes kvs;
  kvs.kv_u32("general.alignment", 3);
  expect_reject(keys_only(1, kvs), {"key 'general.alignment': alignment 3 is not a power of two"});
}

TEST_F(GgufReject, AlignmentNotU32) {
  GgufBytes kvs;
  kvs.kv_i32("general.alignment", 32);
  expect_reject(keys_only(1, kvs), {"key 'general.alignment': holds i32, expected u32"});
}

TEST_F(GgufReject, AlignmentAsU64) {
  GgufBytes kvs;
  kvs.kv_u64("general.alignment", 32);
  expect_reject(keys_only(1, kvs), {"key 'general.alignment': holds u64, expected u32"});
}

// ---- tensor descriptors --------------------------------------------------------

TEST_F(GgufReject, EmptyTensorName) {
  GgufBytes t;
  t.tensor("", {32}, id::kTypeF32, 0);
  expect_reject(with_tensors(1, t, 128), {"header: tensor 1 of 1: the tensor name is empty"});
}

TEST_F(GgufReject, TensorNameLongerThan63) {
  const std::string name(64, 'n');
  GgufBytes t;
  t.tensor(name, {32}, id::kTypeF32, 0);
  expect_reject(with_tensors(1, t, 128), {"tensor '" + name + "': the name is 64 bytes, over the limit of 63"});
}

TEST_F(GgufReject, TensorName63IsAccepted) {
  GgufBytes t;
  t.tensor(std::string(63, 'n'), {32}, id::kTypeF32, 0);
  const GgufBytes b = with_tensors(1, t, 128);
  const GgufHeader h = parse_gguf(reinterpret_cast<const uint8_t*>(b.bytes.data()), b.size(), "x");
  EXPECT_EQ(h.tensors.at(0).name.size(), 63u);
}

TEST_F(GgufReject, DuplicateTensor) {
  GgufBytes t;
  t.tensor("blk.0.attn_q.weight", {8}, id::kTypeF32, 0).tensor("blk.0.attn_q.weight", {8}, id::kTypeF32, 32);
  expect_reject(with_tensors(2, t, 64), {"tensor 'blk.0.attn_q.weight': appears twice (tensors 1 and 2)"});
}

TEST_F(GgufReject, ZeroDims) {
  GgufBytes t;
  t.str("w").u32(0).u32(id::kTypeF32).u64(0);
  expect_reject(with_tensors(1, t, 32), {"tensor 'w': n_dims 0 is outside 1..4"});
}

TEST_F(GgufReject, FiveDims) {
  GgufBytes t;
  t.tensor("w", {1, 1, 1, 1, 1}, id::kTypeF32, 0);
  expect_reject(with_tensors(1, t, 32), {"tensor 'w': n_dims 5 is outside 1..4"});
}

TEST_F(GgufReject, ZeroDimension) {
  GgufBytes t;
  t.tensor("token_embd.weight", {32, 0}, id::kTypeF32, 0);
  expect_reject(with_tensors(1, t, 32), {"tensor 'token_embd.weight': ne[1] = 0 (every dimension must be at least 1)"});
}

TEST_F(GgufReject, NegativeDimension) {
  GgufBytes t;
  t.tensor("w", {32, ~uint64_t(0)}, id::kTypeF32, 0);
  expect_reject(with_tensors(1, t, 32), {"tensor 'w': ne[1] = -1 is negative"});
}

TEST_F(GgufReject, ElementCountOverflow) {
  GgufBytes t;
  t.tensor("w", {uint64_t(1) << 32, uint64_t(1) << 31}, id::kTypeF32, 0);
  expect_reject(with_tensors(1, t, 32), {"tensor 'w': the element count overflows 64 bits at ne[1] = 2147483648"});
}

TEST_F(GgufReject, ByteSizeOverflow) {
  // 2^62 f32 elements fit int64 but take 2^64 bytes.
  GgufBytes t;
  t.tensor("w", {uint64_t(1) << 31, uint64_t(1) << 31}, id::kTypeF32, 0);
  expect_reject(with_tensors(1, t, 32), {"tensor 'w': the byte size overflows 64 bits"});
}

TEST_F(GgufReject, UnknownTypeId) {
  GgufBytes t;
  t.tensor("w", {32}, 99, 0);
  expect_reject(with_tensors(1, t, 128), {"tensor 'w': unknown ggml type id 99"});
}

TEST_F(GgufReject, RemovedTypeId) {
  GgufBytes t;
  t.tensor("w", {32}, 4, 0);  // Q4_2, removed from ggml
  expect_reject(with_tensors(1, t, 128), {"tensor 'w': unknown ggml type id 4"});
}

TEST_F(GgufReject, UnsupportedKnownTypeIsNamed) {
  GgufBytes t;
  t.tensor("blk.0.ffn_up.weight", {256}, 16, 0);
  expect_reject(with_tensors(1, t, 128), {"tensor 'blk.0.ffn_up.weight': unsupported ggml type iq2_xxs (id 16)"});
}

TEST_F(GgufReject, RowNotWholeBlocks) {
  GgufBytes t;
  t.tensor("blk.0.ffn_down.weight", {2112, 4}, id::kTypeQ4_K, 0);
  expect_reject(with_tensors(1, t, 8192),
                {"tensor 'blk.0.ffn_down.weight': ne[0] = 2112 is not a multiple of q4_K's block of 256 elements"});
}

TEST_F(GgufReject, MisalignedOffset) {
  GgufBytes t;
  t.tensor("a", {8}, id::kTypeF32, 0).tensor("b", {8}, id::kTypeF32, 40);
  expect_reject(with_tensors(2, t, 128), {"tensor 'b': offset 40 is not a multiple of the alignment 32"});
}

TEST_F(GgufReject, MisalignedAgainstDeclaredAlignment) {
  GgufBytes b;
  b.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {8}, id::kTypeF32, 32).pad(64).zeros(128);
  expect_reject(b, {"tensor 'w': offset 32 is not a multiple of the alignment 64"});
}

TEST_F(GgufReject, OverlappingTensors) {
  GgufBytes t;
  t.tensor("a", {16}, id::kTypeF32, 0).tensor("b", {8}, id::kTypeF32, 32).tensor("c", {8}, id::kTypeF32, 64);
  // a is 64 bytes [0, 64) and overlaps b [32, 64).
  expect_reject(with_tensors(3, t, 128), {"tensor 'b': data [32, 64) overlaps tensor 'a' [0, 64)"});
}

TEST_F(GgufReject, OverlapFoundWhateverTheOrder) {
  GgufBytes t;
  t.tensor("late", {8}, id::kTypeF32, 96).tensor("early", {32}, id::kTypeF32, 0);
  expect_reject(with_tensors(2, t, 160), {"tensor 'late': data [96, 128) overlaps tensor 'early' [0, 128)"});
}

TEST_F(GgufReject, DataPastTheEnd) {
  GgufBytes t;
  t.tensor("a", {8}, id::kTypeF32, 0).tensor("output_norm.weight", {8}, id::kTypeF32, 32);
  expect_reject(with_tensors(2, t, 63),
                {"tensor 'output_norm.weight': data [32, 64) (relative to the data section) runs past the end of the "
                 "file: the data section holds 63 bytes"});
}

TEST_F(GgufReject, HugeOffset) {
  GgufBytes t;
  t.tensor("a", {8}, id::kTypeF32, ~uint64_t(31));
  expect_reject(with_tensors(1, t, 64), {"tensor 'a': data [", "runs past the end of the file"});
}

TEST_F(GgufReject, DataSectionStartPastTheEnd) {
  // Descriptors end off the alignment and the file stops there.
  GgufBytes b;
  b.header(1, 0).tensor("a", {8}, id::kTypeF32, 0);
  ASSERT_NE(b.size() % 32, 0u);
  expect_reject(b, {"header: the data section would start at offset", "past the end of the"});
}

TEST_F(GgufReject, DescriptorCutOff) {
  GgufBytes b;
  b.header(1, 0).str("blk.0.attn_k").u32(2).u64(8);
  expect_reject(b, {"tensor 'blk.0.attn_k': ne[1] needs 8 bytes", "(truncated file?)"});
}

// ---- every truncation of a valid file ------------------------------------------

TEST_F(GgufReject, EveryTruncationIsAnError) {
  const GgufBytes valid = test::valid_gguf();
  const auto* p = reinterpret_cast<const uint8_t*>(valid.bytes.data());
  ASSERT_NO_THROW(parse_gguf(p, valid.size(), "valid.gguf"));
  for (size_t n = 0; n < valid.size(); ++n) {
    // A copy of exactly n bytes, so that reading past it is a sanitizer error.
    std::vector<uint8_t> prefix(p, p + n);
    try {
      parse_gguf(prefix.data(), n, "cut.gguf");
      ADD_FAILURE() << "a " << n << "-byte prefix of a " << valid.size() << "-byte file was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cut.gguf: ", 0), 0u) << e.what();
    }
  }
}

// A stand-in for the fuzz target in every build: random corruptions of a
// valid file either raise dgemma::Error or parse into a header whose keys
// and tensors lie inside the image (the sanitizer build catches any read
// outside it).
TEST_F(GgufReject, RandomCorruptionsAreErrorsOrConsistent) {
  const GgufBytes valid = test::valid_gguf();
  Rng rng(20261206);
  const uint64_t extremes[] = {0, 1, 3, 63, 64, 65535, 65536, uint64_t(INT64_MAX), ~uint64_t(0), uint64_t(1) << 40};
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> image(valid.bytes.begin(), valid.bytes.end());
    const int edits = int(rng.uniform_int(1, 3));
    for (int e = 0; e < edits && !image.empty(); ++e) {
      const size_t at = size_t(rng.uniform_int(0, int64_t(image.size()) - 1));
      switch (rng.uniform_int(0, 2)) {
        case 0: image[at] = uint8_t(rng.uniform_int(0, 255)); break;
        case 1: {  // a little-endian u64 of an extreme value, cut at the end
          const uint64_t v = extremes[rng.uniform_int(0, std::size(extremes) - 1)];
          for (size_t i = 0; i < 8 && at + i < image.size(); ++i) image[at + i] = uint8_t(v >> (8 * i));
          break;
        }
        default: image.resize(at); break;
      }
    }
    try {
      const GgufHeader h = parse_gguf(image.data(), image.size(), "mutant.gguf");
      ++accepted;
      ASSERT_LE(h.data_offset, image.size());
      for (const GgufKv& kv : h.kvs) {
        ASSERT_GE(kv.data, image.data());
        ASSERT_LE(uint64_t(kv.data - image.data()) + kv.nbytes, image.size());
      }
      for (const GgufTensorInfo& t : h.tensors) {
        ASSERT_EQ(t.offset % h.alignment, 0u);
        ASSERT_LE(h.data_offset + t.offset + t.nbytes, image.size()) << t.name;
      }
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("mutant.gguf: ", 0), 0u) << e.what();
    }
  }
  // Some corruptions (inside tensor data, or a value's bytes) keep the file
  // valid; the loop must have seen both outcomes.
  EXPECT_GT(accepted, 100);
  EXPECT_LT(accepted, 19000);
}

}  // namespace
}  // namespace dgemma

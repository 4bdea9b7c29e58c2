// The GGUF reader on valid files built byte by byte (gguf_test_bytes.h):
// keys and tensors read back as written, the typed getters and their errors,
// the tensor store's GGUF views, and split files (docs/formats.md §5.1).
#include <sys/stat.h>

#include <cstdio>
#include <cstring>

#include "gguf_test_bytes.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "st_test_util.h"

namespace dgemma {
namespace {

using test::expect_error;
using test::GgufBytes;
namespace id = test::gguf_id;

GgufHeader parse(const GgufBytes& b, const std::string& source = "t.gguf") {
  return parse_gguf(reinterpret_cast<const uint8_t*>(b.bytes.data()), b.size(), source);
}

// Where the data section of valid_gguf() starts: the descriptors end, padded
// to 32, located by hand from the builder's pieces.
uint64_t valid_data_offset() {
  GgufBytes probe = test::valid_gguf();
  return probe.size() - (32 + 96 + 6);
}

TEST(GgufReader, HeaderOfValidFile) {
  const GgufBytes b = test::valid_gguf();
  const GgufHeader h = parse(b);
  EXPECT_EQ(h.version, 3u);
  EXPECT_EQ(h.alignment, 32u);
  EXPECT_EQ(h.data_offset, valid_data_offset());
  EXPECT_EQ(h.data_offset % 32, 0u);
  ASSERT_EQ(h.kvs.size(), 6u);
  EXPECT_EQ(h.kvs[0].key, "general.architecture");
  EXPECT_EQ(h.kvs[0].type, GgufValueType::kString);
  EXPECT_EQ(h.kvs[3].key, "toy.head_count_kv");
  EXPECT_EQ(h.kvs[3].type, GgufValueType::kArray);
  EXPECT_EQ(h.kvs[3].elem_type, GgufValueType::kI32);
  EXPECT_EQ(h.kvs[3].count, 2u);
  EXPECT_EQ(h.kvs[3].nbytes, 8u);
  EXPECT_EQ(h.kvs[5].count, 3u);
  EXPECT_EQ(h.kvs[5].nbytes, 8u + 5 + 8 + 1 + 8 + 0);

  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].ne, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(h.tensors[0].type, GgmlType::kF32);
  EXPECT_EQ(h.tensors[0].offset, 0u);
  EXPECT_EQ(h.tensors[0].nbytes, 32u);
  EXPECT_EQ(h.tensors[1].type, GgmlType::kQ8_0);
  EXPECT_EQ(h.tensors[1].offset, 32u);
  EXPECT_EQ(h.tensors[1].nbytes, 68u);  // 2 rows of one 34-byte block
  EXPECT_EQ(h.tensors[2].type, GgmlType::kF16);
  EXPECT_EQ(h.tensors[2].offset, 128u);
  EXPECT_EQ(h.tensors[2].nbytes, 6u);
}

TEST(GgufReader, KeysTypedGetters) {
  const GgufBytes b = test::valid_gguf();
  const GgufHeader h = parse(b, "toy.gguf");
  const GgufKeys keys(&h.kvs, "toy.gguf");
  EXPECT_EQ(keys.string("general.architecture"), "toy");
  EXPECT_EQ(keys.integer("toy.block_count"), 2);
  EXPECT_EQ(keys.number("toy.block_count"), 2.0);
  EXPECT_EQ(keys.number("toy.rope.freq_base"), 10000.0);
  EXPECT_EQ(keys.integers("toy.head_count_kv"), (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(keys.booleans("toy.pattern"), (std::vector<bool>{true, false, true}));
  const std::vector<std::string_view> tokens = keys.strings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[0], "<pad>");
  EXPECT_EQ(tokens[1], "a");
  EXPECT_EQ(tokens[2], "");
  EXPECT_TRUE(keys.has("toy.pattern"));
  EXPECT_FALSE(keys.has("toy.missing"));
  EXPECT_EQ(keys.find("toy.missing"), nullptr);
}

TEST(GgufReader, KeysTypeErrorsNameKeyAndTypes) {
  const GgufBytes b = test::valid_gguf();
  const GgufHeader h = parse(b);
  const GgufKeys keys(&h.kvs, "toy.gguf");
  expect_error([&] { keys.integer("general.architecture"); },
               {"toy.gguf: key 'general.architecture': holds string, expected an integer"});
  expect_error([&] { keys.integer("toy.rope.freq_base"); },
               {"toy.gguf: key 'toy.rope.freq_base': holds f32, expected an integer"});
  expect_error([&] { keys.number("toy.pattern"); }, {"key 'toy.pattern': holds an array of 3 bool, expected a number"});
  expect_error([&] { keys.string("toy.block_count"); }, {"key 'toy.block_count': holds u32, expected string"});
  expect_error([&] { keys.boolean("toy.block_count"); }, {"key 'toy.block_count': holds u32, expected bool"});
  expect_error([&] { keys.integers("toy.block_count"); },
               {"key 'toy.block_count': holds u32, expected an array of integers"});
  expect_error([&] { keys.integers("tokenizer.ggml.tokens"); },
               {"key 'tokenizer.ggml.tokens': holds an array of 3 string, expected an array of integers"});
  expect_error([&] { keys.strings("toy.head_count_kv"); },
               {"key 'toy.head_count_kv': holds an array of 2 i32, expected an array of strings"});
  expect_error([&] { keys.floats("toy.head_count_kv"); }, {"expected an array of floats"});
  expect_error([&] { keys.booleans("toy.head_count_kv"); }, {"expected an array of bool"});
  expect_error([&] { keys.integer("toy.missing"); }, {"toy.gguf: key 'toy.missing' is missing"});
}

TEST(GgufReader, EveryScalarType) {
  GgufBytes b;
  b.header(0, 12)
      .kv_u8("u8", 200)
      .kv_head("i8", id::kI8)
      .u8(0x80)
      .kv_u16("u16", 65535)
      .kv_head("i16", id::kI16)
      .u16(0x8000)
      .kv_u32("u32", 4000000000u)
      .kv_i32("i32", -7)
      .kv_f32("f32", 0.5f)
      .kv_bool("bool", true)
      .kv_u64("u64", uint64_t(1) << 63)
      .kv_i64("i64", -(int64_t(1) << 40))
      .kv_f64("f64", -2.25)
      .kv_f32s("f32s", {1.5f, -3.0f})
      .pad();
  const GgufHeader h = parse(b);
  const GgufKeys keys(&h.kvs, "t.gguf");
  EXPECT_EQ(keys.integer("u8"), 200);
  EXPECT_EQ(keys.integer("i8"), -128);
  EXPECT_EQ(keys.integer("u16"), 65535);
  EXPECT_EQ(keys.integer("i16"), -32768);
  EXPECT_EQ(keys.integer("u32"), 4000000000);
  EXPECT_EQ(keys.integer("i32"), -7);
  EXPECT_EQ(keys.number("f32"), 0.5);
  EXPECT_TRUE(keys.boolean("bool"));
  EXPECT_EQ(keys.number("u64"), 9223372036854775808.0);
  expect_error([&] { keys.integer("u64"); },
               {"key 'u64': value 9223372036854775808 does not fit a signed 64-bit integer"});
  EXPECT_EQ(keys.integer("i64"), -(int64_t(1) << 40));
  EXPECT_EQ(keys.number("f64"), -2.25);
  EXPECT_EQ(keys.floats("f32s"), (std::vector<float>{1.5f, -3.0f}));
}

TEST(GgufReader, AlignmentKeyMovesTheDataSection) {
  GgufBytes b;
  b.header(2, 1).kv_u32("general.alignment", 64).tensor("x", {3}, id::kTypeF32, 0).tensor("y", {2}, id::kTypeBF16, 64);
  b.pad(64);
  const uint64_t data = b.size();
  b.pattern(12, 9).zeros(52).pattern(4, 5);
  const GgufHeader h = parse(b);
  EXPECT_EQ(h.alignment, 64u);
  EXPECT_EQ(h.data_offset, data);
  EXPECT_EQ(h.tensors[1].nbytes, 4u);
}

TEST(GgufReader, AnyAlignedOrderIsRead) {
  // Data in the reverse of the descriptors' order, with a gap.
  GgufBytes b;
  b.header(2, 0).tensor("first", {8}, id::kTypeF32, 96).tensor("second", {8}, id::kTypeF32, 0);
  b.pad().zeros(128);
  const GgufHeader h = parse(b);
  EXPECT_EQ(h.tensors[0].offset, 96u);
  EXPECT_EQ(h.tensors[1].offset, 0u);
}

TEST(GgufReader, FileWithoutTensorsNeedsNoPadding) {
  GgufBytes b;
  b.header(0, 1).kv_u8("x", 1);
  ASSERT_NE(b.size() % 32, 0u);
  const GgufHeader h = parse(b);
  EXPECT_TRUE(h.tensors.empty());
  EXPECT_LE(h.data_offset, b.size());
}

TEST(GgufReader, VersionTwoIsRead) {
  GgufBytes b;
  b.header(0, 0, 2);
  EXPECT_EQ(parse(b).version, 2u);
}

TEST(GgufReader, FileMapsTensorData) {
  test::TempDir dir;
  const std::string path = dir.file("toy.gguf");
  const GgufBytes b = test::valid_gguf();
  test::write_bytes(path, b.bytes);
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->file_size(), b.size());
  const uint64_t data = valid_data_offset();
  const auto& ts = f->header().tensors;
  for (const GgufTensorInfo& t : ts) {
    const uint8_t* p = f->data(t);
    EXPECT_EQ(std::memcmp(p, b.bytes.data() + data + t.offset, t.nbytes), 0) << t.name;
  }
  // valid_gguf() fills b with the pattern seed 2 + 7i.
  EXPECT_EQ(f->data(ts[1])[0], 2);
  EXPECT_EQ(f->data(ts[1])[1], 9);
  EXPECT_EQ(f->keys().string("general.architecture"), "toy");
  EXPECT_EQ(f->keys().source(), path);
}

TEST(GgufReader, OpenErrors) {
  test::TempDir dir;
  expect_error([&] { GgufFile::open(dir.file("none.gguf")); }, {"cannot open", "none.gguf"});
  expect_error([&] { GgufFile::open(dir.path()); }, {"not a regular file"});
}

TEST(GgufReader, LooksLikeGguf) {
  test::TempDir dir;
  test::write_bytes(dir.file("a.gguf"), test::valid_gguf().bytes);
  test::write_bytes(dir.file("b.safetensors"), test::le64(2) + "{}");
  test::write_bytes(dir.file("short"), "GGU");
  EXPECT_TRUE(looks_like_gguf(dir.file("a.gguf")));
  EXPECT_FALSE(looks_like_gguf(dir.file("b.safetensors")));
  EXPECT_FALSE(looks_like_gguf(dir.file("short")));
  EXPECT_FALSE(looks_like_gguf(dir.file("missing")));
}

// ---- the tensor store ----------------------------------------------------------

TEST(GgufStore, ViewsRenamedAndReversed) {
  test::TempDir dir;
  const std::string path = dir.file("toy.gguf");
  const GgufBytes b = test::valid_gguf();
  test::write_bytes(path, b.bytes);
  const GgufModelFiles files = GgufModelFiles::open(path);
  TensorStore store = TensorStore::open_gguf(files, [](std::string_view n) -> std::string {
    if (n == "a") return "model.a.weight";
    if (n == "b") return "model.b.weight";
    return "";  // c keeps its name
  });
  EXPECT_EQ(store.names(), (std::vector<std::string>{"c", "model.a.weight", "model.b.weight"}));
  EXPECT_EQ(store.dir(), dir.path());
  EXPECT_TRUE(store.files().empty());
  ASSERT_EQ(store.gguf_parts().size(), 1u);
  const uint64_t data = valid_data_offset();

  const TensorView* a = store.find("model.a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(a->dtype(), DType::kF32);
  EXPECT_FALSE(a->info->ggml_blocks.has_value());
  EXPECT_EQ(a->info->begin, data);
  EXPECT_EQ(a->nbytes(), 32u);
  EXPECT_EQ(a->numel(), 8);
  EXPECT_EQ(a->file, path);
  EXPECT_EQ(std::memcmp(a->data, b.bytes.data() + data, 32), 0);

  const TensorView* q = store.find("model.b.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape(), (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(q->dtype(), DType::kF32);
  ASSERT_TRUE(q->info->ggml_blocks.has_value());
  EXPECT_EQ(*q->info->ggml_blocks, GgmlType::kQ8_0);
  EXPECT_EQ(q->info->begin, data + 32);
  EXPECT_EQ(q->info->end, data + 32 + 68);
  EXPECT_EQ(q->numel(), 64);
  EXPECT_EQ(std::memcmp(q->data, b.bytes.data() + data + 32, 68), 0);

  const TensorView* c = store.find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype(), DType::kF16);
  EXPECT_EQ(c->shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(store.find("a"), nullptr);
}

TEST(GgufStore, NoRenameKeepsNamesAndCopiesOutliveOriginals) {
  test::TempDir dir;
  const std::string path = dir.file("toy.gguf");
  const GgufBytes b = test::valid_gguf();
  test::write_bytes(path, b.bytes);
  TensorStore copy;
  {
    TensorStore store = TensorStore::open_gguf(GgufModelFiles::open(path), {});
    copy = store;
  }
  EXPECT_EQ(copy.names(), (std::vector<std::string>{"a", "b", "c"}));
  const TensorView* c = copy.find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name(), "c");
  EXPECT_EQ(std::memcmp(c->data, b.bytes.data() + valid_data_offset() + 128, 6), 0);
}

TEST(GgufStore, TwoTensorsRenamedAlikeIsAnError) {
  test::TempDir dir;
  const std::string path = dir.file("toy.gguf");
  test::write_bytes(path, test::valid_gguf().bytes);
  expect_error([&] { TensorStore::open_gguf(GgufModelFiles::open(path), [](std::string_view) { return "same"; }); },
               {path + ": tensors 'a' and 'b' both map to the name \"same\""});
}

// ---- split files ---------------------------------------------------------------

class GgufSplit : public ::testing::Test {
 protected:
  std::string part(int no, int count) const {
    char buf[40];
    std::snprintf(buf, sizeof buf, "-%05d-of-%05d.gguf", no, count);
    return dir_.file("model") + buf;
  }
  // A part with the three split keys (and, for part 1, a general key) and
  // f32 [8] tensors of the given names.
  static GgufBytes part_bytes(uint16_t no, uint16_t count, int32_t total, const std::vector<std::string>& tensors,
                              bool general = false) {
    GgufBytes b;
    b.header(tensors.size(), general ? 4 : 3);
    if (general) b.kv_string("general.architecture", "toy");
    b.kv_head("split.no", id::kU16)
        .u16(no)
        .kv_head("split.count", id::kU16)
        .u16(count)
        .kv_head("split.tensors.count", id::kI32);
    b.i32(total);
    for (size_t i = 0; i < tensors.size(); ++i) b.tensor(tensors[i], {8}, id::kTypeF32, 32 * i);
    b.pad();
    for (size_t i = 0; i < tensors.size(); ++i) b.pattern(32, uint8_t(10 * no + i));
    return b;
  }
  void write(int no, int count, const GgufBytes& b) { test::write_bytes(part(no, count), b.bytes); }
  // The usual three parts: metadata only, then two tensors in each.
  void write_three() {
    write(1, 3, part_bytes(0, 3, 4, {}, true));
    write(2, 3, part_bytes(1, 3, 4, {"t0", "t1"}));
    write(3, 3, part_bytes(2, 3, 4, {"t2", "t3"}));
  }
  test::TempDir dir_;
};

TEST_F(GgufSplit, AnyPartOpensTheSet) {
  write_three();
  for (int given = 1; given <= 3; ++given) {
    const GgufModelFiles files = GgufModelFiles::open(part(given, 3));
    ASSERT_EQ(files.parts().size(), 3u);
    EXPECT_EQ(files.path(), part(1, 3));
    EXPECT_EQ(files.parts()[2]->path(), part(3, 3));
    EXPECT_EQ(files.keys().string("general.architecture"), "toy");
    EXPECT_TRUE(files.parts()[0]->header().tensors.empty());
  }
  const TensorStore store = TensorStore::open_gguf(GgufModelFiles::open(part(1, 3)), {});
  EXPECT_EQ(store.names(), (std::vector<std::string>{"t0", "t1", "t2", "t3"}));
  EXPECT_EQ(store.find("t3")->file, part(3, 3));
  // Pattern seeds: 10 * split.no + the tensor's index in its part.
  EXPECT_EQ(store.find("t3")->data[0], 21);
  EXPECT_EQ(store.find("t0")->data[0], 10);
}

TEST_F(GgufSplit, MissingPart) {
  write(1, 3, part_bytes(0, 3, 4, {}, true));
  write(3, 3, part_bytes(2, 3, 4, {"t2", "t3"}));
  expect_error([&] { GgufModelFiles::open(part(1, 3)); },
               {part(1, 3) + ": part 2 of 3 is missing (" + part(2, 3) + ")"});
}

TEST_F(GgufSplit, WrongSplitNo) {
  write_three();
  write(3, 3, part_bytes(1, 3, 4, {"t2", "t3"}));
  expect_error([&] { GgufModelFiles::open(part(1, 3)); },
               {part(3, 3) + ": key 'split.no' is 1, expected 2 for part 3 of 3"});
}

TEST_F(GgufSplit, SplitCountDisagrees) {
  write_three();
  write(2, 3, part_bytes(1, 4, 4, {"t0", "t1"}));
  expect_error([&] { GgufModelFiles::open(part(1, 3)); }, {part(2, 3) + ": key 'split.count' is 4, but"});
}

TEST_F(GgufSplit, TensorCountMismatch) {
  write(1, 3, part_bytes(0, 3, 5, {}, true));
  write(2, 3, part_bytes(1, 3, 5, {"t0", "t1"}));
  write(3, 3, part_bytes(2, 3, 5, {"t2", "t3"}));
  expect_error([&] { GgufModelFiles::open(part(1, 3)); },
               {part(1, 3) + ": key 'split.tensors.count' is 5, but the 3 parts hold 4 tensors"});
}

TEST_F(GgufSplit, TensorCountDisagreesBetweenParts) {
  write_three();
  write(3, 3, part_bytes(2, 3, 7, {"t2", "t3"}));
  expect_error([&] { GgufModelFiles::open(part(1, 3)); },
               {part(3, 3) + ": key 'split.tensors.count' is 7, but part 1 says 4"});
}

TEST_F(GgufSplit, TensorInTwoParts) {
  write_three();
  write(3, 3, part_bytes(2, 3, 4, {"t1", "t3"}));
  expect_error([&] { GgufModelFiles::open(part(1, 3)); }, {part(3, 3) + ": tensor 't1' is also in " + part(2, 3)});
}

TEST_F(GgufSplit, NameDisagreesWithKeys) {
  write_three();
  write(2, 3, part_bytes(0, 3, 4, {"t0", "t1"}));
  expect_error([&] { GgufModelFiles::open(part(2, 3)); },
               {part(2, 3) + ": the file name says part 2 of 3, but its keys say part 1 of 3"});
}

TEST_F(GgufSplit, SplitKeysWithoutSplitName) {
  test::write_bytes(dir_.file("model.gguf"), part_bytes(0, 2, 1, {"t0"}, true).bytes);
  expect_error([&] { GgufModelFiles::open(dir_.file("model.gguf")); },
               {"key 'split.count' says the model is split over 2 files, but the file name does not end in "
                "-NNNNN-of-MMMMM.gguf"});
}

TEST_F(GgufSplit, SplitCountZero) {
  write(1, 1, part_bytes(0, 0, 1, {"t0"}, true));
  expect_error([&] { GgufModelFiles::open(part(1, 1)); }, {"key 'split.count': value 0 is outside 1..99999"});
}

TEST_F(GgufSplit, SplitKeyOfWrongKind) {
  GgufBytes b;
  b.header(0, 3).kv_string("split.no", "0").kv_u16("split.count", 2).kv_i32("split.tensors.count", 0).pad();
  write(1, 2, b);
  expect_error([&] { GgufModelFiles::open(part(1, 2)); }, {"key 'split.no': holds string, expected an integer"});
}

TEST_F(GgufSplit, OnePartSetIsASingleFile) {
  write(1, 1, part_bytes(0, 1, 2, {"t0", "t1"}, true));
  const GgufModelFiles files = GgufModelFiles::open(part(1, 1));
  ASSERT_EQ(files.parts().size(), 1u);
  EXPECT_EQ(files.parts()[0]->header().tensors.size(), 2u);
}

TEST_F(GgufSplit, PlainFileWithSplitLikeNameIsSingle) {
  // No split keys: the name alone does not make a set.
  test::write_bytes(part(1, 2), test::valid_gguf().bytes);
  const GgufModelFiles files = GgufModelFiles::open(part(1, 2));
  EXPECT_EQ(files.parts().size(), 1u);
}

}  // namespace
}  // namespace dgemma

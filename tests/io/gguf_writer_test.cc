// The streaming GGUF writer: what it writes reads back through the reader,
// its layout is the packed one llama.cpp requires (checked by the test-local
// walker in gguf_test_bytes.h, with sizes from the test's own block table),
// sparse tensors stay holes, and incomplete or misplaced writes are refused
// (docs/formats.md §5.1).
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "gguf_test_bytes.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "st_test_util.h"

namespace dgemma {
namespace {

using test::expect_error;
namespace id = test::gguf_id;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<uint8_t> bytes_of(uint64_t n, uint8_t seed) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t(seed + 13 * i);
  return v;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t pad32(uint64_t n) { return (n + 31) / 32 * 32; }

// "t<i>", built without operator+(const char*, std::string&&), whose
// insert(0, ...) trips GCC 12's -Wrestrict false positive.
std::string tname(int i) {
  std::string s = "t";
  s += std::to_string(i);
  return s;
}

struct Declared {
  std::string name;
  GgmlType type;
  uint32_t type_id;  // the format's id, for the walker
  std::vector<int64_t> ne;
};

const std::vector<Declared>& declared() {
  static const std::vector<Declared> d = {
      {"token_embd.weight", GgmlType::kQ8_0, id::kTypeQ8_0, {64, 3}},       // 3 rows x 2 blocks x 34 = 204 bytes
      {"blk.0.attn_norm.weight", GgmlType::kF32, id::kTypeF32, {5}},        // 20 bytes
      {"blk.0.ffn_down.weight", GgmlType::kQ4_K, id::kTypeQ4_K, {256, 2}},  // 2 x 144 = 288 bytes
      {"blk.0.x", GgmlType::kBF16, id::kTypeBF16, {3, 2, 2}},               // 24 bytes
  };
  return d;
}

std::vector<uint64_t> as_u64(const std::vector<int64_t>& v) { return std::vector<uint64_t>(v.begin(), v.end()); }

class GgufWriterTest : public ::testing::Test {
 protected:
  test::TempDir dir_;
};

TEST_F(GgufWriterTest, RoundTripKeysAndTensors) {
  const std::string path = dir_.file("out.gguf");
  std::vector<std::vector<uint8_t>> data;
  {
    GgufStreamWriter w;
    w.add_string("general.architecture", "diffusion-gemma");
    w.add_u8("k.u8", 250);
    w.add_i8("k.i8", -5);
    w.add_u16("k.u16", 60000);
    w.add_i16("k.i16", -30000);
    w.add_u32("k.u32", 4000000000u);
    w.add_i32("k.i32", -2);
    w.add_u64("k.u64", uint64_t(1) << 40);
    w.add_i64("k.i64", -(int64_t(1) << 50));
    w.add_f32("k.f32", 0.25f);
    w.add_f64("k.f64", 1e300);
    w.add_bool("k.bool", true);
    w.add_array("k.i32s", std::vector<int32_t>{8, 8, 2});
    w.add_array("k.u8s", std::vector<uint8_t>{1, 2});
    w.add_array("k.i64s", std::vector<int64_t>{-1, 1});
    w.add_array("k.f32s", std::vector<float>{1.0f, 1e30f});
    w.add_array("k.f64s", std::vector<double>{0.5});
    w.add_array("k.bools", std::vector<bool>{true, false, false, true});
    w.add_array("k.strings", std::vector<std::string>{"<pad>", "", "\xe2\x96\x81hello"});
    w.add_array("k.views", std::vector<std::string_view>{"a b", "c"});
    for (const Declared& d : declared()) w.declare(d.name, d.type, d.ne);
    w.begin(path);
    // Each tensor in three pieces, last piece first.
    uint8_t seed = 1;
    for (const Declared& d : declared()) {
      data.push_back(bytes_of(w.nbytes(d.name), seed++));
      const std::vector<uint8_t>& v = data.back();
      const uint64_t third = v.size() / 3;
      w.write(d.name, v.data() + 2 * third, v.size() - 2 * third, 2 * third);
      w.write(d.name, v.data(), third, 0);
      w.write(d.name, v.data() + third, third, third);
    }
    w.finish();
  }
  EXPECT_EQ(files_in(dir_.path()), (std::vector<std::string>{"out.gguf"}));

  auto f = GgufFile::open(path);
  const GgufKeys k = f->keys();
  EXPECT_EQ(f->header().version, 3u);
  EXPECT_EQ(k.string("general.architecture"), "diffusion-gemma");
  EXPECT_EQ(k.integer("k.u8"), 250);
  EXPECT_EQ(k.integer("k.i8"), -5);
  EXPECT_EQ(k.integer("k.u16"), 60000);
  EXPECT_EQ(k.integer("k.i16"), -30000);
  EXPECT_EQ(k.integer("k.u32"), 4000000000);
  EXPECT_EQ(k.integer("k.i32"), -2);
  EXPECT_EQ(k.integer("k.u64"), int64_t(1) << 40);
  EXPECT_EQ(k.integer("k.i64"), -(int64_t(1) << 50));
  EXPECT_EQ(k.number("k.f32"), 0.25);
  EXPECT_EQ(k.number("k.f64"), 1e300);
  EXPECT_TRUE(k.boolean("k.bool"));
  EXPECT_EQ(k.find("k.u16")->type, GgufValueType::kU16);
  EXPECT_EQ(k.find("k.i64")->type, GgufValueType::kI64);
  EXPECT_EQ(k.find("k.i32s")->elem_type, GgufValueType::kI32);
  EXPECT_EQ(k.integers("k.i32s"), (std::vector<int64_t>{8, 8, 2}));
  EXPECT_EQ(k.integers("k.u8s"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(k.integers("k.i64s"), (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(k.floats("k.f32s"), (std::vector<float>{1.0f, 1e30f}));
  EXPECT_EQ(k.floats("k.f64s"), (std::vector<float>{0.5f}));
  EXPECT_EQ(k.booleans("k.bools"), (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(k.strings("k.strings"), (std::vector<std::string_view>{"<pad>", "", "\xe2\x96\x81hello"}));
  EXPECT_EQ(k.strings("k.views"), (std::vector<std::string_view>{"a b", "c"}));
  EXPECT_EQ(f->header().kvs.front().key, "general.architecture");  // keys in the order added

  const auto& ts = f->header().tensors;
  ASSERT_EQ(ts.size(), declared().size());
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(ts[i].name, declared()[i].name);
    EXPECT_EQ(ts[i].type, declared()[i].type);
    EXPECT_EQ(ts[i].ne, declared()[i].ne);
    ASSERT_EQ(ts[i].nbytes, data[i].size());
    EXPECT_EQ(std::memcmp(f->data(ts[i]), data[i].data(), data[i].size()), 0) << ts[i].name;
  }
}

TEST_F(GgufWriterTest, PackedLayoutAsLlamaCppRequires) {
  const std::string path = dir_.file("packed.gguf");
  GgufStreamWriter w;
  w.add_string("general.name", "odd-length-name");
  for (const Declared& d : declared()) w.declare(d.name, d.type, d.ne);
  w.begin(path);
  for (const Declared& d : declared()) {
    const std::vector<uint8_t> v = bytes_of(w.nbytes(d.name), 7);
    w.write(d.name, v.data(), v.size());
  }
  w.finish();

  const std::string image = read_all(path);
  const test::WalkedFile walked = test::walk_gguf(image);
  EXPECT_EQ(walked.version, 3u);
  EXPECT_EQ(walked.keys, (std::vector<std::string>{"general.name"}));
  ASSERT_EQ(walked.tensors.size(), declared().size());
  // Each tensor at the running sum of the earlier ones' sizes padded to 32;
  // sizes from the test's own block table: 204, 20, 288, 24 bytes.
  uint64_t expected = 0;
  const uint64_t sizes[] = {204, 20, 288, 24};
  for (size_t i = 0; i < walked.tensors.size(); ++i) {
    const test::WalkedTensor& t = walked.tensors[i];
    EXPECT_EQ(t.name, declared()[i].name);
    EXPECT_EQ(t.type, declared()[i].type_id);
    EXPECT_EQ(t.ne, as_u64(declared()[i].ne));
    EXPECT_EQ(test::test_tensor_bytes(t.type, t.ne), sizes[i]);
    EXPECT_EQ(t.offset, expected) << t.name;
    expected += pad32(sizes[i]);
  }
  EXPECT_EQ(expected, 224u + 32 + 288 + 32);
  const uint64_t data_start = pad32(walked.infos_end);
  EXPECT_EQ(image.size(), data_start + expected);
  // Header padding and inter-tensor padding are zeros.
  for (uint64_t i = walked.infos_end; i < data_start; ++i) EXPECT_EQ(image[i], '\0') << i;
  for (uint64_t i = data_start + 204; i < data_start + 224; ++i) EXPECT_EQ(image[i], '\0') << i;
}

TEST_F(GgufWriterTest, SparseTensorsAreHoles) {
  const std::string path = dir_.file("sparse.gguf");
  const int64_t rows = 2048, cols = 8192;  // 64 MiB of f32
  GgufStreamWriter w;
  w.declare_sparse("big.weight", GgmlType::kF32, {cols, rows});
  w.declare("small.weight", GgmlType::kF32, {4});
  w.begin(path);
  const float small[4] = {1, 2, 3, 4};
  w.write("small.weight", small, sizeof small);
  const float piece[2] = {5, 6};
  w.write("big.weight", piece, sizeof piece, 4 * uint64_t(cols) * 100);  // row 100's first two values
  w.finish();

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_GE(uint64_t(st.st_size), uint64_t(rows * cols * 4));
  EXPECT_LT(uint64_t(st.st_blocks) * 512, uint64_t(st.st_size) / 16) << "the sparse tensor took disk blocks";

  auto f = GgufFile::open(path);
  const auto& ts = f->header().tensors;
  ASSERT_EQ(ts.size(), 2u);
  const auto* big = reinterpret_cast<const float*>(f->data(ts[0]));
  EXPECT_EQ(big[0], 0.0f);
  EXPECT_EQ(big[cols * 100], 5.0f);
  EXPECT_EQ(big[cols * 100 + 1], 6.0f);
  EXPECT_EQ(std::memcmp(f->data(ts[1]), small, sizeof small), 0);
}

TEST_F(GgufWriterTest, PartialWriteIsRefusedAndLeavesNothing) {
  const std::string path = dir_.file("partial.gguf");
  {
    GgufStreamWriter w;
    w.declare("a", GgmlType::kF32, {8});
    w.declare("blk.3.ffn_up.weight", GgmlType::kQ8_0, {32, 2});
    w.begin(path);
    const std::vector<uint8_t> a = bytes_of(32, 1), b = bytes_of(68, 2);
    w.write("a", a.data(), a.size());
    w.write("blk.3.ffn_up.weight", b.data(), 34);
    w.write("blk.3.ffn_up.weight", b.data() + 35, 33, 35);  // byte 34 missing
    expect_error([&] { w.finish(); }, {"tensor 'blk.3.ffn_up.weight': 67 of 68 bytes written", path});
  }
  EXPECT_TRUE(files_in(dir_.path()).empty());
}

TEST_F(GgufWriterTest, MisplacedWritesAreRefused) {
  GgufStreamWriter w;
  w.declare("a", GgmlType::kF32, {8});
  const std::vector<uint8_t> v = bytes_of(32, 1);
  expect_error([&] { w.write("a", v.data(), 4); }, {"write of tensor 'a' outside begin()..finish()"});
  w.begin(dir_.file("m.gguf"));
  expect_error([&] { w.write("a", v.data(), 8, 28); }, {"tensor 'a': 8 bytes at 28 run past its 32 bytes"});
  expect_error([&] { w.write("b", v.data(), 4); }, {"tensor 'b' was not declared"});
  w.write("a", v.data(), 8, 8);
  expect_error([&] { w.write("a", v.data(), 8, 12); }, {"tensor 'a': bytes [12, 20) overlap bytes already written"});
  expect_error([&] { w.write("a", v.data(), 8, 4); }, {"tensor 'a': bytes [4, 12) overlap bytes already written"});
  expect_error([&] { w.declare("c", GgmlType::kF32, {8}); }, {"tensor 'c': declared after begin()"});
  expect_error([&] { w.add_u32("k", 1); }, {"key 'k' added after begin()"});
  // Adjacent pieces on both sides merge into one complete tensor.
  w.write("a", v.data(), 8, 0);
  w.write("a", v.data() + 16, 16, 16);
  w.finish();
  auto f = GgufFile::open(dir_.file("m.gguf"));
  EXPECT_EQ(f->header().tensors[0].nbytes, 32u);
}

TEST_F(GgufWriterTest, DeclarationErrors) {
  GgufStreamWriter w;
  w.add_u32("toy.block_count", 2);
  expect_error([&] { w.add_u32("toy.block_count", 3); }, {"key 'toy.block_count' added twice"});
  expect_error([&] { w.add_u32("general.alignment", 64); },
               {"key 'general.alignment': the writer always aligns to 32"});
  expect_error([&] { w.add_string("", "x"); }, {"a key name is empty"});
  w.declare("t", GgmlType::kF32, {4});
  expect_error([&] { w.declare("t", GgmlType::kF16, {4}); }, {"tensor 't': declared twice"});
  expect_error([&] { w.declare(std::string(64, 'n'), GgmlType::kF32, {4}); }, {"the name is 64 bytes (must be 1..63)"});
  expect_error([&] { w.declare("u", GgmlType::kF32, {}); }, {"tensor 'u': 0 dimensions (must be 1..4)"});
  expect_error([&] { w.declare("u", GgmlType::kF32, {1, 1, 1, 1, 1}); }, {"tensor 'u': 5 dimensions"});
  expect_error([&] { w.declare("u", GgmlType::kF32, {4, 0}); }, {"tensor 'u': ne[1] = 0 (must be >= 1)"});
  expect_error(
      [&] {
        w.declare("u", GgmlType::kQ4_K, {704, 2});
      },
      {"tensor 'u': ne[0] = 704 is not a multiple of q4_K's block of 256 elements"});
  expect_error(
      [&] {
        w.declare("u", GgmlType::kF32, {int64_t(1) << 40, int64_t(1) << 30});
      },
      {"tensor 'u': the element count overflows 64 bits"});
  expect_error([&] { w.finish(); }, {"finish() without begin()"});
}

TEST_F(GgufWriterTest, EmptyModelIsAValidFile) {
  const std::string path = dir_.file("empty.gguf");
  GgufStreamWriter w;
  w.add_string("general.architecture", "toy");
  w.begin(path);
  w.finish();
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f->header().tensors.empty());
  EXPECT_EQ(f->file_size() % 32, 0u);
}

// ---- split output ----------------------------------------------------------------

// Five f32 tensors of 64, 40 (padded to 64), 200 (224), 16 (32) and 64 bytes
// with parts of at most 128 data bytes: {t0, t1}, {t2} (larger than a part:
// alone), {t3, t4}.
TEST_F(GgufWriterTest, SplitOutputReadsBackAsOneModel) {
  const int64_t elems[] = {16, 10, 50, 4, 16};
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::string> paths;
  {
    GgufStreamWriter w;
    w.add_string("general.architecture", "toy");
    w.add_u32("toy.block_count", 2);
    for (int i = 0; i < 5; ++i) w.declare(tname(i), GgmlType::kF32, {elems[i]});
    w.split(128);
    w.begin(dir_.file("model.gguf"));
    paths = w.paths();
    for (int i = 0; i < 5; ++i) {
      data.push_back(bytes_of(uint64_t(elems[i]) * 4, uint8_t(i + 1)));
      w.write(tname(i), data.back().data(), data.back().size());
    }
    w.finish();
  }
  ASSERT_EQ(paths,
            (std::vector<std::string>{dir_.file("model-00001-of-00003.gguf"), dir_.file("model-00002-of-00003.gguf"),
                                      dir_.file("model-00003-of-00003.gguf")}));
  EXPECT_EQ(files_in(dir_.path()), (std::vector<std::string>{"model-00001-of-00003.gguf", "model-00002-of-00003.gguf",
                                                             "model-00003-of-00003.gguf"}));
  // Each part by the test-local walker: keys and tensors as laid out above.
  const std::vector<std::vector<std::string>> keys = {
      {"general.architecture", "toy.block_count", "split.no", "split.count", "split.tensors.count"},
      {"split.no", "split.count", "split.tensors.count"},
      {"split.no", "split.count", "split.tensors.count"}};
  const std::vector<std::vector<std::pair<std::string, uint64_t>>> layout = {
      {{"t0", 0}, {"t1", 64}}, {{"t2", 0}}, {{"t3", 0}, {"t4", 32}}};
  for (size_t p = 0; p < 3; ++p) {
    const test::WalkedFile f = test::walk_gguf(read_all(paths[p]));
    EXPECT_EQ(f.keys, keys[p]) << paths[p];
    ASSERT_EQ(f.tensors.size(), layout[p].size()) << paths[p];
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      EXPECT_EQ(f.tensors[i].name, layout[p][i].first);
      EXPECT_EQ(f.tensors[i].offset, layout[p][i].second);
    }
  }
  // The reader takes the set from any part; the split keys have the types
  // llama.cpp's gguf-split writes.
  const GgufModelFiles files = GgufModelFiles::open(paths[1]);
  ASSERT_EQ(files.parts().size(), 3u);
  const GgufKeys k = files.keys();
  EXPECT_EQ(k.integer("toy.block_count"), 2);
  EXPECT_EQ(k.find("split.no")->type, GgufValueType::kU16);
  EXPECT_EQ(k.find("split.count")->type, GgufValueType::kU16);
  EXPECT_EQ(k.find("split.tensors.count")->type, GgufValueType::kI32);
  EXPECT_EQ(files.parts()[2]->keys().integer("split.no"), 2);
  EXPECT_EQ(k.integer("split.tensors.count"), 5);
  const TensorStore store = TensorStore::open_gguf(files, {});
  for (int i = 0; i < 5; ++i) {
    const TensorView* v = store.find(tname(i));
    ASSERT_NE(v, nullptr);
    ASSERT_EQ(v->nbytes(), data[size_t(i)].size());
    EXPECT_EQ(std::memcmp(v->data, data[size_t(i)].data(), v->nbytes()), 0) << i;
  }
}

TEST_F(GgufWriterTest, SplitWithOnePartStillNamesIt) {
  GgufStreamWriter w;
  w.declare("t", GgmlType::kF32, {4});
  w.split(uint64_t(1) << 30);
  w.begin(dir_.file("m.gguf"));
  const std::vector<uint8_t> v = bytes_of(16, 3);
  w.write("t", v.data(), v.size());
  w.finish();
  EXPECT_EQ(files_in(dir_.path()), (std::vector<std::string>{"m-00001-of-00001.gguf"}));
  const GgufModelFiles files = GgufModelFiles::open(dir_.file("m-00001-of-00001.gguf"));
  EXPECT_EQ(files.parts().size(), 1u);
}

TEST_F(GgufWriterTest, IncompleteSplitOutputLeavesNothing) {
  {
    GgufStreamWriter w;
    for (int i = 0; i < 3; ++i) w.declare(tname(i), GgmlType::kF32, {16});
    w.split(64);
    w.begin(dir_.file("m.gguf"));
    const std::vector<uint8_t> v = bytes_of(64, 3);
    w.write("t0", v.data(), v.size());
    w.write("t2", v.data(), v.size());
    expect_error([&] { w.finish(); }, {"tensor 't1': 0 of 64 bytes written (" + dir_.file("m-00002-of-00003.gguf")});
  }
  EXPECT_TRUE(files_in(dir_.path()).empty());
}

TEST_F(GgufWriterTest, SplitMisuse) {
  GgufStreamWriter w;
  w.add_u16("split.no", 0);
  w.split(100);
  expect_error([&] { w.begin(dir_.file("m.gguf")); }, {"key 'split.no' is the writer's own when splitting"});
  GgufStreamWriter w2;
  w2.split(100);
  expect_error([&] { w2.begin(dir_.file("m.bin")); }, {"a split output's path must end in .gguf"});
  GgufStreamWriter w3;
  expect_error([&] { w3.split(0); }, {"the part size must be at least 1 byte"});
}

}  // namespace
}  // namespace dgemma

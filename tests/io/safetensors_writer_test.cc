// SafetensorsWriter: round trips of every whole-byte dtype, the reference
// writer's layout (docs/formats.md §1.3), and byte-exact output for the
// examples the reference implementation pins down.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "st_test_util.h"

namespace dgemma {
namespace {

// Spelled with append() to dodge GCC 12's false -Wrestrict on
// `"literal" + std::string`.
std::string tensor_name(DType t) { return std::string("t").append(dtype_name(t)); }

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + 37 * i + (i >> 8));
  return v;
}

std::string file_bytes(const std::string& path) { return read_text_file(path); }

struct Case {
  DType dtype;
  std::vector<int64_t> shape;
};

TEST(SafetensorsWriter, RoundTripsEveryWholeByteDtype) {
  const std::vector<Case> cases = {
      {DType::kBool, {3}},      {DType::kU8, {5, 3}},    {DType::kI8, {7}},         {DType::kU16, {3, 1}},
      {DType::kI16, {5}},       {DType::kF16, {2, 3}},   {DType::kBF16, {9}},       {DType::kU32, {3}},
      {DType::kI32, {1, 1, 3}}, {DType::kF32, {4, 5}},   {DType::kU64, {3}},        {DType::kI64, {2}},
      {DType::kF64, {3}},       {DType::kF8_E4M3, {11}}, {DType::kF8_E5M2, {2, 5}}, {DType::kC64, {3}},
  };
  test::TempDir dir;
  const std::string path = dir.file("all.safetensors");
  SafetensorsWriter w;
  std::vector<std::vector<uint8_t>> payloads;
  for (size_t i = 0; i < cases.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : cases[i].shape) n *= d;
    payloads.push_back(pattern(size_t(n) * size_t(dtype_bits(cases[i].dtype) / 8), uint8_t(i)));
    w.add(tensor_name(cases[i].dtype), cases[i].dtype, cases[i].shape, payloads.back().data());
  }
  const float scalar = 3.5f;
  w.add_f32("scalar", {}, &scalar);
  w.add("empty", DType::kBF16, {0, 4}, nullptr);
  w.set_metadata("format", "pt");
  w.write(path);

  auto f = SafetensorsFile::open(path);
  ASSERT_EQ(f->tensors().size(), cases.size() + 2);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = tensor_name(cases[i].dtype);
    const TensorInfo* info = f->find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, cases[i].dtype) << name;
    EXPECT_EQ(info->shape, cases[i].shape) << name;
    TensorView v = f->view(*info);
    ASSERT_EQ(v.nbytes(), payloads[i].size()) << name;
    EXPECT_EQ(std::memcmp(v.data, payloads[i].data(), payloads[i].size()), 0) << name;
    EXPECT_TRUE(v.aligned()) << name;
    EXPECT_EQ(v.file, path);
  }
  const TensorInfo* s = f->find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->numel(), 1);
  EXPECT_EQ(f->view(*s).at_f32(0), 3.5f);
  const TensorInfo* e = f->find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->numel(), 0);
  EXPECT_EQ(e->nbytes(), 0u);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{0, 4}));
  ASSERT_EQ(f->header().metadata.size(), 1u);
  EXPECT_EQ(f->header().metadata[0], (std::pair<std::string, std::string>{"format", "pt"}));
  EXPECT_EQ(f->header().data_offset % 8, 0u);
  EXPECT_EQ(f->find("absent"), nullptr);
}

TEST(SafetensorsWriter, LaysOutByDescendingDtypeThenName) {
  test::TempDir dir;
  const std::string path = dir.file("order.safetensors");
  const uint8_t bytes[64] = {};
  SafetensorsWriter w;
  w.add("z", DType::kU8, {3}, bytes);
  w.add("b", DType::kF32, {1}, bytes);
  w.add("a", DType::kF32, {1}, bytes);
  w.add("d", DType::kBF16, {1}, bytes);
  w.add("c", DType::kI64, {1}, bytes);
  w.add("y", DType::kF16, {1}, bytes);
  w.write(path);
  auto f = SafetensorsFile::open(path);
  std::vector<std::string> order;
  for (const auto& t : f->tensors()) order.push_back(t.name);  // sorted by offset
  EXPECT_EQ(order, (std::vector<std::string>{"c", "a", "b", "d", "y", "z"}));
  // The header lists the keys in the same order (checked on the raw text so
  // that the reader's own sorting cannot hide it).
  const std::string raw = file_bytes(path);
  const std::string header = raw.substr(8, f->header().data_offset - 8);
  size_t last = 0;
  for (const auto& name : order) {
    size_t at = header.find("\"" + name + "\":");
    ASSERT_NE(at, std::string::npos);
    EXPECT_GT(at, last);
    last = at;
  }
}

// The examples below have fixed bytes in the reference writer's own tests:
// compact JSON, `__metadata__` first, space padding to a multiple of 8.
TEST(SafetensorsWriter, ByteExactSingleTensor) {
  test::TempDir dir;
  const std::string path = dir.file("one.safetensors");
  const float data[6] = {0, 1, 2, 3, 4, 5};
  SafetensorsWriter w;
  w.add_f32("attn.0", {1, 2, 3}, data);
  w.write(path);
  const std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  EXPECT_EQ(file_bytes(path), test::le64(64) + header + std::string(reinterpret_cast<const char*>(data), 24));
}

TEST(SafetensorsWriter, ByteExactPadding) {
  test::TempDir dir;
  const std::string path = dir.file("pad.safetensors");
  const float data[6] = {0, 1, 2, 3, 4, 5};
  SafetensorsWriter w;
  w.add_f32("attn0", {1, 1, 2, 3}, data);
  w.write(path);
  const std::string header = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  EXPECT_EQ(file_bytes(path),
            test::le64(72) + header + std::string(7, ' ') + std::string(reinterpret_cast<const char*>(data), 24));
}

TEST(SafetensorsWriter, ByteExactEmptyFiles) {
  test::TempDir dir;
  const std::string a = dir.file("a.safetensors"), b = dir.file("b.safetensors");
  SafetensorsWriter().write(a);
  EXPECT_EQ(file_bytes(a), test::le64(8) + "{}      ");
  SafetensorsWriter w;
  w.set_metadata("framework", "pt");
  w.write(b);
  EXPECT_EQ(file_bytes(b), test::le64(40) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
}

TEST(SafetensorsWriter, EscapesNamesAndSortsMetadata) {
  test::TempDir dir;
  const std::string path = dir.file("esc.safetensors");
  const uint8_t one = 1;
  SafetensorsWriter w;
  w.add("we\"ird\\name\n\xc3\xa9", DType::kU8, {1}, &one);
  w.set_metadata("z", "last");
  w.set_metadata("a", "first");
  w.set_metadata("z", "replaced");
  w.write(path);
  auto f = SafetensorsFile::open(path);
  ASSERT_NE(f->find("we\"ird\\name\n\xc3\xa9"), nullptr);
  const auto& md = f->header().metadata;
  ASSERT_EQ(md.size(), 2u);
  EXPECT_EQ(md[0], (std::pair<std::string, std::string>{"a", "first"}));
  EXPECT_EQ(md[1], (std::pair<std::string, std::string>{"z", "replaced"}));
}

TEST(SafetensorsWriter, OverwritesAtomicallyAndLeavesNoTempFile) {
  test::TempDir dir;
  const std::string path = dir.file("x.safetensors");
  test::write_bytes(path, "old contents");
  const uint8_t b[2] = {7, 8};
  SafetensorsWriter w;
  w.add("b", DType::kU8, {2}, b);
  w.write(path);
  EXPECT_EQ(SafetensorsFile::open(path)->tensors().size(), 1u);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST(SafetensorsWriter, RejectsBadInput) {
  test::TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const uint8_t b[8] = {};
  {
    SafetensorsWriter w;
    w.add("a", DType::kU8, {1}, b);
    w.add("a", DType::kF32, {1}, b);
    test::expect_error([&] { w.write(path); }, {"tensor \"a\" added twice"});
  }
  {
    SafetensorsWriter w;
    w.add("__metadata__", DType::kU8, {1}, b);
    test::expect_error([&] { w.write(path); }, {"\"__metadata__\" is reserved"});
  }
  test::expect_error([&] { SafetensorsWriter().add("n", DType::kU8, {-1}, b); }, {"invalid dimension -1"});
  test::expect_error([&] { SafetensorsWriter().add("q", DType::kF4, {3}, b); },
                     {"12 bits of F4 is not a whole number of bytes"});
  test::expect_error([&] { SafetensorsWriter().add("p", DType::kU8, {2}, nullptr); }, {"tensor \"p\": no data"});
  test::expect_error([&] { SafetensorsWriter().add_sparse("bad\xff", DType::kU8, {2}); },
                     {"tensor name \"bad\xef\xbf\xbd\" is not valid UTF-8"});
  test::expect_error([&] { SafetensorsWriter().set_metadata("k", "\xc3"); }, {"metadata value", "not valid UTF-8"});
  test::expect_error([&] { SafetensorsWriter().write(dir.file("no/such/dir.safetensors")); }, {"cannot create"});
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsWriter, SubByteWholeBytesRoundTrip) {
  test::TempDir dir;
  const std::string path = dir.file("f4.safetensors");
  const uint8_t packed[3] = {0x12, 0x34, 0x56};
  SafetensorsWriter w;
  w.add("q", DType::kF4, {2, 3}, packed);
  w.write(path);
  auto f = SafetensorsFile::open(path);
  const TensorInfo* q = f->find("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->nbytes(), 3u);
  EXPECT_EQ(std::memcmp(f->view(*q).data, packed, 3), 0);
}

TEST(ReadTextFile, ReadsAndReportsErrors) {
  test::TempDir dir;
  const std::string path = dir.file("t.txt");
  std::string content(200000, 'x');
  content[12345] = '\0';
  test::write_bytes(path, content);
  EXPECT_EQ(read_text_file(path), content);
  test::expect_error([&] { read_text_file(dir.file("missing.txt")); }, {"cannot open", "missing.txt"});
  test::expect_error([&] { read_text_file(dir.path()); }, {"not a regular file"});
}

}  // namespace
}  // namespace dgemma

// The seed corpus of fuzz/gguf_header.cc (fuzz/corpus/gguf_header/) is made
// here from the test-local byte builder: the test checks that the committed
// files are exactly these images and that each parses (or is refused) as its
// name says. DGEMMA_WRITE_FUZZ_CORPUS=1 rewrites the folder instead.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf_test_bytes.h"
#include "io/gguf.h"
#include "st_test_util.h"

namespace dgemma {
namespace {

using test::GgufBytes;
namespace id = test::gguf_id;

std::vector<std::pair<std::string, GgufBytes>> seeds() {
  std::vector<std::pair<std::string, GgufBytes>> out;
  out.emplace_back("valid_toy.gguf", test::valid_gguf());
  {
    GgufBytes b;
    b.header(0, 14)
        .kv_u8("u8", 1)
        .kv_head("i8", id::kI8)
        .u8(0xff)
        .kv_u16("u16", 2)
        .kv_head("i16", id::kI16)
        .u16(0xfffe)
        .kv_u32("u32", 3)
        .kv_i32("i32", -4)
        .kv_f32("f32", 0.5f)
        .kv_bool("bool", false)
        .kv_string("string", "text")
        .kv_u64("u64", 6)
        .kv_i64("i64", -7)
        .kv_f64("f64", 8.5)
        .kv_strings("strings", {"a", "bc", ""})
        .kv_bools("bools", {true, false});
    out.emplace_back("valid_every_key_type.gguf", b);
  }
  {
    GgufBytes b;
    b.header(4, 2).kv_string("general.architecture", "toy").kv_u32("general.alignment", 64);
    b.tensor("q4_k", {256, 1}, id::kTypeQ4_K, 0)
        .tensor("q6_k", {256}, id::kTypeQ6_K, 192)
        .tensor("q4_0", {32, 2}, id::kTypeQ4_0, 448)
        .tensor("bf16", {2, 1, 1, 2}, id::kTypeBF16, 512);
    b.pad(64).pattern(144, 1).zeros(48).pattern(210, 2).zeros(46).pattern(36, 3).zeros(28).pattern(8, 4);
    out.emplace_back("valid_block_types_align64.gguf", b);
  }
  {
    GgufBytes b;
    b.header(0, 4)
        .kv_string("general.architecture", "toy")
        .kv_head("split.no", id::kU16)
        .u16(0)
        .kv_head("split.count", id::kU16)
        .u16(2)
        .kv_i32("split.tensors.count", 1)
        .pad();
    out.emplace_back("valid_split_first_part.gguf", b);
  }
  {
    GgufBytes b;
    b.header(0, 2).kv_u32("k", 1).kv_u32("k", 2).pad();
    out.emplace_back("invalid_duplicate_key.gguf", b);
  }
  {
    GgufBytes b;
    b.header(2, 0).tensor("a", {16}, id::kTypeF32, 0).tensor("b", {8}, id::kTypeF32, 32).pad().zeros(64);
    out.emplace_back("invalid_overlap.gguf", b);
  }
  {
    GgufBytes b;
    b.header(0, 1).kv_array("nested", id::kArray, 1).u32(id::kU8).u64(1).u8(0).pad();
    out.emplace_back("invalid_nested_array.gguf", b);
  }
  return out;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(GgufCorpus, SeedsMatchTheBuilder) {
  const std::string dir = dgemma::source_dir() + "/fuzz/corpus/gguf_header";
  const char* write = std::getenv("DGEMMA_WRITE_FUZZ_CORPUS");
  if (write && std::string(write) == "1") {
    std::filesystem::create_directories(dir);
    for (const auto& [name, b] : seeds()) test::write_bytes(dir + "/" + name, b.bytes);
  }
  size_t committed = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++committed;
  }
  EXPECT_EQ(committed, seeds().size()) << dir << " holds files the builder does not make";
  for (const auto& [name, b] : seeds()) {
    EXPECT_EQ(read_all(dir + "/" + name), b.bytes) << name << " differs from the builder's image";
    const auto* p = reinterpret_cast<const uint8_t*>(b.bytes.data());
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_NO_THROW(parse_gguf(p, b.size(), name)) << name;
    } else {
      EXPECT_THROW(parse_gguf(p, b.size(), name), Error) << name;
    }
  }
}

}  // namespace
}  // namespace dgemma

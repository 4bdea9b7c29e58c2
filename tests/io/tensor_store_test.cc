// TensorStore: sharded checkpoints through model.safetensors.index.json and
// every rejection rule of docs/formats.md §1.6, plus plain folders.
#include <cstring>

#include "io/safetensors.h"
#include "st_test_util.h"

namespace dgemma {
namespace {

using test::expect_error;

// A valid single-file image with U8 tensors of the given names, each holding
// two bytes {i, i + 100}. Built raw so that the store is tested on its own.
std::string shard_image(const std::vector<std::string>& names) {
  std::string header = "{";
  std::string data;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) header += ",";
    header += "\"" + names[i] + "\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[" + std::to_string(2 * i) + "," +
              std::to_string(2 * i + 2) + "]}";
    data += char(i);
    data += char(i + 100);
  }
  header += "}";
  return test::st_image(header, data);
}

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_bytes(dir_.file("model-00001-of-00002.safetensors"), shard_image({"a", "b"}));
    test::write_bytes(dir_.file("model-00002-of-00002.safetensors"), shard_image({"c"}));
  }
  void write_index(const std::string& text) { test::write_bytes(dir_.file("model.safetensors.index.json"), text); }
  std::string index_path() const { return dir_.file("model.safetensors.index.json"); }
  static std::string good_map() {
    return R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
               "c": "model-00002-of-00002.safetensors"})";
  }
  void expect_index_error(const std::string& index, const std::vector<std::string>& needles) {
    write_index(index);
    std::vector<std::string> all = needles;
    all.push_back(index_path());
    expect_error([&] { TensorStore::open_dir(dir_.path()); }, all);
  }
  test::TempDir dir_;
};

TEST_F(ShardedCheckpoint, OpensIndexAndShards) {
  write_index(R"({"metadata": {"total_size": 6, "total_parameters": 6}, "weight_map": )" + good_map() + "}");
  // A stray file that the index does not reference must be ignored.
  test::write_bytes(dir_.file("consolidated.safetensors"), shard_image({"a"}));
  TensorStore store = TensorStore::open_dir(dir_.path());
  EXPECT_EQ(store.dir(), dir_.path());
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(store.files().size(), 2u);
  const TensorView* c = store.find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name(), "c");
  EXPECT_EQ(c->data[0], 0);
  EXPECT_EQ(c->data[1], 100);
  EXPECT_NE(c->file.find("model-00002-of-00002.safetensors"), std::string_view::npos);
  const TensorView* b = store.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->data[0], 1);
  EXPECT_EQ(store.find("d"), nullptr);
  // The store is a value: a copy keeps the files alive on its own.
  TensorStore copy = store;
  store = TensorStore::open_file(dir_.file("model-00002-of-00002.safetensors"));
  EXPECT_EQ(copy.find("a")->data[1], 100);
}

TEST_F(ShardedCheckpoint, RejectsShardNameWithSlash) {
  expect_index_error(R"({"weight_map": {"a": "sub/model.safetensors"}})",
                     {"shard name \"sub/model.safetensors\" for tensor \"a\" contains '/'"});
}

TEST_F(ShardedCheckpoint, RejectsAbsoluteShardPath) {
  expect_index_error(R"({"weight_map": {"a": "/etc/passwd"}})", {"shard name \"/etc/passwd\"", "contains '/'"});
}

TEST_F(ShardedCheckpoint, RejectsShardNameWithBackslash) {
  expect_index_error(R"({"weight_map": {"a": "..\\x.safetensors"}})", {"contains '\\'"});
}

TEST_F(ShardedCheckpoint, RejectsDotDot) {
  expect_index_error(R"({"weight_map": {"a": ".."}})", {"shard name \"..\" for tensor \"a\" contains '..'"});
}

TEST_F(ShardedCheckpoint, RejectsNulInShardName) {
  expect_index_error(R"({"weight_map": {"a": "model-00001-of-00002.safetensors\u0000.txt"}})", {"contains a NUL byte"});
}

TEST_F(ShardedCheckpoint, RejectsEmptyShardName) {
  expect_index_error(R"({"weight_map": {"a": ""}})", {"shard name \"\" for tensor \"a\" is empty"});
}

TEST_F(ShardedCheckpoint, RejectsMissingShard) {
  expect_index_error(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                        "b": "model-00001-of-00002.safetensors",
                                        "c": "model-00003-of-00003.safetensors"}})",
                     {"shard \"model-00003-of-00003.safetensors\" does not exist"});
}

TEST_F(ShardedCheckpoint, RejectsCorruptShard) {
  std::string bad = shard_image({"c"});
  bad.push_back('!');  // one trailing byte
  test::write_bytes(dir_.file("model-00002-of-00002.safetensors"), bad);
  write_index(R"({"weight_map": )" + good_map() + "}");
  expect_error([&] { TensorStore::open_dir(dir_.path()); },
               {dir_.file("model-00002-of-00002.safetensors") + ": file has 1 trailing bytes"});
}

TEST_F(ShardedCheckpoint, RejectsEntryMissingFromNamedShard) {
  expect_index_error(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                        "b": "model-00001-of-00002.safetensors",
                                        "c": "model-00002-of-00002.safetensors",
                                        "d": "model-00002-of-00002.safetensors"}})",
                     {"weight_map maps tensor \"d\" to shard \"model-00002-of-00002.safetensors\", which does not "
                      "contain it"});
}

TEST_F(ShardedCheckpoint, RejectsTensorInTwoShards) {
  test::write_bytes(dir_.file("model-00002-of-00002.safetensors"), shard_image({"b", "c"}));
  expect_index_error(R"({"weight_map": )" + good_map() + "}",
                     {"tensor \"b\" is stored in two shards: \"model-00001-of-00002.safetensors\" and "
                      "\"model-00002-of-00002.safetensors\""});
}

TEST_F(ShardedCheckpoint, RejectsTensorMissingFromIndex) {
  expect_index_error(R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                        "c": "model-00002-of-00002.safetensors"}})",
                     {"tensor \"b\" in shard \"model-00001-of-00002.safetensors\" is missing from the index "
                      "weight_map"});
}

TEST_F(ShardedCheckpoint, RejectsIndexWithoutWeightMap) {
  expect_index_error(R"({"metadata": {"total_size": 6}})", {"missing \"weight_map\""});
}

TEST_F(ShardedCheckpoint, RejectsEmptyWeightMap) {
  expect_index_error(R"({"weight_map": {}})", {"weight_map is empty (no shards)"});
}

TEST_F(ShardedCheckpoint, RejectsWeightMapNotObject) {
  expect_index_error(R"({"weight_map": ["model-00001-of-00002.safetensors"]})",
                     {"weight_map is array, expected an object"});
}

TEST_F(ShardedCheckpoint, RejectsNonStringShard) {
  expect_index_error(R"({"weight_map": {"a": 1}})",
                     {"weight_map entry for tensor \"a\" is number, expected a shard file name"});
}

TEST_F(ShardedCheckpoint, RejectsIndexNotObject) {
  expect_index_error(R"(["weight_map"])", {"top level is array, expected an object"});
}

TEST_F(ShardedCheckpoint, RejectsInvalidIndexJson) {
  expect_index_error(R"({"weight_map": {"a": "x", "a": "y"}})", {"duplicate key \"a\""});
}

// ---- folders without an index ------------------------------------------------------

TEST(TensorStoreFolder, OpensEverySafetensorsFileSorted) {
  test::TempDir dir;
  test::write_bytes(dir.file("b.safetensors"), shard_image({"y"}));
  test::write_bytes(dir.file("a.safetensors"), shard_image({"x", "z"}));
  test::write_bytes(dir.file("notes.txt"), "not a checkpoint");
  TensorStore store = TensorStore::open_dir(dir.path());
  ASSERT_EQ(store.files().size(), 2u);
  EXPECT_EQ(store.files()[0]->path(), dir.file("a.safetensors"));
  EXPECT_EQ(store.files()[1]->path(), dir.file("b.safetensors"));
  EXPECT_EQ(store.names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(store.find("z")->data[0], 1);
}

TEST(TensorStoreFolder, RejectsNameInTwoFiles) {
  test::TempDir dir;
  test::write_bytes(dir.file("a.safetensors"), shard_image({"x"}));
  test::write_bytes(dir.file("b.safetensors"), shard_image({"y", "x"}));
  expect_error([&] { TensorStore::open_dir(dir.path()); },
               {"tensor \"x\" is in both " + dir.file("a.safetensors") + " and " + dir.file("b.safetensors")});
}

TEST(TensorStoreFolder, RejectsFolderWithoutCheckpoint) {
  test::TempDir dir;
  expect_error([&] { TensorStore::open_dir(dir.path()); }, {dir.path(), "no model.safetensors.index.json"});
  expect_error([&] { TensorStore::open_dir(dir.file("absent")); }, {"cannot list checkpoint folder"});
}

TEST(TensorStoreFolder, OpenFile) {
  test::TempDir dir;
  test::write_bytes(dir.file("m.safetensors"), shard_image({"p", "q"}));
  TensorStore store = TensorStore::open_file(dir.file("m.safetensors"));
  EXPECT_EQ(store.dir(), dir.path());
  EXPECT_EQ(store.names(), (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ(store.find("q")->data[1], 101);
}

}  // namespace
}  // namespace dgemma

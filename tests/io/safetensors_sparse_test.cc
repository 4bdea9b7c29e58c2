// Sparse tensors are holes: the full-size fake checkpoint must cost (almost)
// no disk space, and the holes must read back as zeros.
#include <sys/stat.h>

#include <cstring>

#include "io/safetensors.h"
#include "st_test_util.h"

namespace dgemma {
namespace {

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

TEST(SafetensorsSparse, HolesTakeNoBlocksAndReadAsZero) {
  test::TempDir dir;
  const std::string path = dir.file("sparse.safetensors");
  const int64_t kBig = 16 << 20;  // 64 MiB of F32 per tensor
  std::vector<float> dense(1000);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = float(i) * 0.5f;
  SafetensorsWriter w;
  // "a" (F32) lands between the two sparse F32 tensors; "z" (U8, laid out
  // last) is sparse so that the file has to be extended at the end.
  w.add_sparse("big0", DType::kF32, {kBig});
  w.add_f32("big1", {int64_t(dense.size())}, dense.data());
  w.add_sparse("big2", DType::kF32, {4, kBig / 4});
  w.add_sparse("z", DType::kU8, {1 << 20});
  w.write(path);

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  const uint64_t expected_data = uint64_t(2 * kBig * 4 + 4000 + (1 << 20));
  EXPECT_GT(uint64_t(st.st_size), expected_data);
  // st_blocks counts 512-byte units actually allocated.
  const uint64_t allocated = uint64_t(st.st_blocks) * 512;
  EXPECT_LT(allocated, uint64_t(st.st_size) / 100) << "allocated " << allocated << " of " << st.st_size;

  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->file_size(), uint64_t(st.st_size));
  for (const char* name : {"big0", "big2", "z"}) {
    const TensorInfo* t = f->find(name);
    ASSERT_NE(t, nullptr) << name;
    TensorView v = f->view(*t);
    // Touch only the ends and the middle: a full scan would fault in 64 MiB.
    const size_t n = size_t(v.nbytes());
    EXPECT_TRUE(all_zero(v.data, 4096)) << name;
    EXPECT_TRUE(all_zero(v.data + n / 2, 4096)) << name;
    EXPECT_TRUE(all_zero(v.data + n - 4096, 4096)) << name;
  }
  const TensorInfo* b1 = f->find("big1");
  ASSERT_NE(b1, nullptr);
  TensorView v = f->view(*b1);
  ASSERT_TRUE(v.aligned());
  for (size_t i = 0; i < dense.size(); ++i) ASSERT_EQ(v.at_f32(i), dense[i]) << i;
  EXPECT_EQ(f->find("big2")->shape, (std::vector<int64_t>{4, kBig / 4}));
}

}  // namespace
}  // namespace dgemma

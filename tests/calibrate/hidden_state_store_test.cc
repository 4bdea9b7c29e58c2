// Hidden states between calibration layers (calibrate/hidden_state_store.h):
// in memory and in a scratch file alike, what is put is what is got, bit for
// bit; the scratch file leaves nothing behind; wrong shapes are errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "calibrate/hidden_state_store.h"
#include "dgemma/error.h"

namespace dgemma {
namespace {

Tensor rows_of(int64_t rows, int64_t width, float salt) {
  Tensor t = Tensor::f32({rows, width});
  for (size_t i = 0; i < t.f.size(); ++i) t.f[i] = salt + float(i) * 0.37f - float(i % 7) * 1e-7f;
  return t;
}

void round_trip(const std::string& scratch) {
  HiddenStateStore store({3, 1, 5}, 4, scratch);
  EXPECT_EQ(store.on_disk(), !scratch.empty());
  EXPECT_EQ(store.bytes(), uint64_t(9 * 4 * 4));
  for (size_t i : {2, 0, 1}) store.put(i, rows_of(int64_t(std::vector<int>{3, 1, 5}[i]), 4, float(i) * 10));
  store.put(1, rows_of(1, 4, -3.5f));  // overwritten in place
  EXPECT_EQ(store.get(0).f, rows_of(3, 4, 0).f);
  EXPECT_EQ(store.get(1).f, rows_of(1, 4, -3.5f).f);
  EXPECT_EQ(store.get(2).f, rows_of(5, 4, 20).f);
  EXPECT_EQ(store.get(2).shape, (std::vector<int64_t>{5, 4}));
  EXPECT_THROW(store.put(0, rows_of(2, 4, 0)), Error);
  EXPECT_THROW(store.get(3), Error);
}

TEST(HiddenStateStore, InMemory) {
  round_trip("");
  HiddenStateStore store({2}, 3, "");
  EXPECT_THROW(store.get(0), Error);  // never stored
}

TEST(HiddenStateStore, OnDiskLeavesNoFile) {
  const std::string dir = dgemma_test_temp_dir("hidden_states");
  round_trip(dir);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(HiddenStateStore, UnwritableScratchFolderIsAnError) {
  EXPECT_THROW(HiddenStateStore({1}, 1, "/nonexistent/folder"), Error);
}

}  // namespace
}  // namespace dgemma

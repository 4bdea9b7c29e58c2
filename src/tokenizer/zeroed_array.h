#pragma once
// A fixed-size, zero-initialized array for the tokenizer's big hash tables
// (merges: 16 MB, pieces: 4 MB). Large arrays are mapped with transparent
// huge pages where the OS offers them: lookups into these tables are random,
// and with 4 KB pages nearly every probe is also a TLB miss (measured: most
// of the load time and of the cold encode time). Zero pages from the kernel
// also make "fill with empty" free, so empty slots are encoded as 0.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace dgemma::tok {

template <typename T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  ZeroedArray() = default;
  explicit ZeroedArray(size_t n) : n_(n) {
    size_t bytes = n * sizeof(T);
    if (bytes == 0) return;
#if defined(__linux__)
    constexpr size_t kHuge = size_t(2) << 20;
    if (bytes >= kHuge / 2) {
      map_bytes_ = (bytes + kHuge - 1) / kHuge * kHuge + kHuge;  // room to align
      void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      map_ = p;
      auto aligned = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~uintptr_t(kHuge - 1);
      data_ = reinterpret_cast<T*>(aligned);
      madvise(data_, map_bytes_ - (aligned - reinterpret_cast<uintptr_t>(p)), MADV_HUGEPAGE);
      return;
    }
#endif
    data_ = static_cast<T*>(std::calloc(n, sizeof(T)));
    if (!data_) throw std::bad_alloc();
  }
  ~ZeroedArray() { release(); }
  ZeroedArray(ZeroedArray&& o) noexcept { *this = std::move(o); }
  ZeroedArray& operator=(ZeroedArray&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      n_ = std::exchange(o.n_, 0);
      map_ = std::exchange(o.map_, nullptr);
      map_bytes_ = std::exchange(o.map_bytes_, 0);
    }
    return *this;
  }
  ZeroedArray(const ZeroedArray&) = delete;
  ZeroedArray& operator=(const ZeroedArray&) = delete;

  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* begin() { return data_; }
  T* end() { return data_ + n_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + n_; }

 private:
  void release() {
#if defined(__linux__)
    if (map_) {
      munmap(map_, map_bytes_);
      map_ = nullptr;
      data_ = nullptr;
      return;
    }
#endif
    std::free(data_);
    data_ = nullptr;
  }
  T* data_ = nullptr;
  size_t n_ = 0;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
};

}  // namespace dgemma::tok

#pragma once
// A growable buffer of uninitialized elements for per-call scratch that is
// reused across calls: get(n) reallocates only when n exceeds the capacity,
// and never zero-fills. Kernels keep one per thread (thread_local), so a
// GEMM or MoE call that needs tens of MB of activations does not page-fault
// and memset them on every call; the memory is held at its high-water mark
// until the thread exits.
#include <cstddef>
#include <memory>
#include <type_traits>

namespace dgemma {

template <class T>
class Scratch {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>);

 public:
  // Room for n elements, contents unspecified (those of an earlier call, or
  // none).
  T* get(size_t n) {
    if (n > capacity_) {
      data_.reset(new T[n]);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

}  // namespace dgemma

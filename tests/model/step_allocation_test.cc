// A denoising step allocates no buffers once the first steps have
// sized the workspace (model/workspace.h). Counts every operator new of
// 1 KiB or more (any tensor of the golden model is at least [16, 64] fp32 =
// 4 KiB; the op-call bookkeeping is a few pointers) while decoder passes run.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "model/diffusion_gemma.h"
#include "cpu_model.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_large{0};
std::atomic<long> g_large_bytes{0};

void* counted_alloc(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed) && n >= 1024) {
    g_large.fetch_add(1, std::memory_order_relaxed);
    g_large_bytes.fetch_add(long(n), std::memory_order_relaxed);
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

}  // namespace

// Replaceable global allocation functions (this test binary only).
void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them): a
// nothrow new from the runtime freed by the free() below would be an
// allocation/deallocation mismatch under AddressSanitizer.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace dgemma {
namespace {

TEST(StepAllocation, WarmDecoderPassesAllocateNoBuffers) {
  auto m = test::load_on_cpu(std::string(DGEMMA_TEST_DATA) + "/golden_a");
  const int64_t L = m->canvas_length(), V = m->vocab_size();
  std::vector<int32_t> prompt(20);
  for (size_t k = 0; k < prompt.size(); ++k) prompt[k] = int32_t((k * 37 + 11) % size_t(V));
  m->encode(prompt);
  std::vector<int32_t> canvas(static_cast<size_t>(L));
  for (size_t k = 0; k < canvas.size(); ++k) canvas[k] = int32_t((k * 13 + 5) % size_t(V));
  std::vector<float> first(static_cast<size_t>(L * V)), logits(static_cast<size_t>(L * V));
  // Warm-up: sizes the workspace and packs the weights. These passes do
  // allocate, which also shows that the hook sees the model's allocations.
  g_counting = true;
  m->decode(canvas.data(), nullptr, first.data());
  m->decode(canvas.data(), first.data(), logits.data());
  g_counting = false;
  EXPECT_GT(g_large.load(), 10);
  g_large = 0;
  g_large_bytes = 0;
  g_counting = true;
  for (int step = 0; step < 3; ++step) {
    m->decode(canvas.data(), nullptr, logits.data());
    m->decode(canvas.data(), first.data(), logits.data());
  }
  g_counting = false;
  EXPECT_EQ(g_large.load(), 0) << g_large_bytes.load() << " bytes in allocations of >= 1 KiB";
}

}  // namespace
}  // namespace dgemma

#pragma once
// Counter-based random numbers for seeded generation (docs/model.md §3.5, our
// recommendation there): Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011) keyed by the seed, with the counter
// built from (canvas, step, purpose, position). Every value therefore depends
// only on where it is used, never on the order or thread that asks for it.
#include <array>
#include <cstdint>

namespace dgemma {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// One Philox4x32 block with 10 rounds (Random123 `philox4x32_R(10, ...)`).
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// The three kinds of random draws in generate() (docs/model.md §3.5: A, B, C).
enum class DrawPurpose : uint32_t { kInit = 0, kSample = 1, kRenoise = 2 };

// An endless stream of 32-bit words for one (seed, canvas, step, purpose,
// position). Counter layout: [0] position, [1] canvas, [2] step,
// [3] purpose << 28 | block index; key = the two halves of the seed. Each
// block gives 4 words; rejection sampling just reads further blocks.
class PhiloxStream {
 public:
  PhiloxStream(uint64_t seed, uint32_t canvas, uint32_t step, DrawPurpose purpose, uint32_t position);

  uint32_t next_u32();
  // Exactly uniform in [0, n) for 0 < n <= 2^32 - 1: 32x32->64-bit
  // multiply-high with rejection of the biased low range (Lemire 2019).
  uint32_t uniform_int(uint32_t n);
  // Uniform in [0, 1) with 24 random bits (every float of the form k / 2^24).
  float uniform_float();
  // Uniform in [0, 1) with 53 random bits, for inverse-CDF sampling over
  // large vocabularies where 2^-24 would quantize small probabilities.
  double uniform_double();

 private:
  void refill();
  PhiloxCounter counter_;
  PhiloxKey key_;
  PhiloxCounter block_{};
  uint32_t block_index_ = 0;
  int used_ = 4;  // words of block_ already handed out
};

// A fresh seed from std::random_device, below 2^53 so that it survives a
// round trip through a JSON number in JavaScript (IEEE double) unchanged.
uint64_t random_seed();
constexpr uint64_t kMaxExactJsonSeed = (uint64_t(1) << 53) - 1;

}  // namespace dgemma

#include "generate/rng.h"

#include <random>

#include "dgemma/error.h"

namespace dgemma {
namespace {

// Philox4x32 constants (Random123 philox.h): round multipliers and Weyl key
// increments (golden ratio and sqrt(3) - 1 in 32-bit fixed point).
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
constexpr int kPhiloxRounds = 10;

constexpr uint32_t kBlockIndexBits = 28;  // 2^28 blocks of 4 words per stream
constexpr uint32_t kBlockIndexMask = (1u << kBlockIndexBits) - 1;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t(a) * b;
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter x, PhiloxKey k) {
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) {  // the key is bumped between rounds, not before the first
      k[0] += kPhiloxW0;
      k[1] += kPhiloxW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kPhiloxM0, x[0], hi0, lo0);
    mulhilo(kPhiloxM1, x[2], hi1, lo1);
    x = {hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0};
  }
  return x;
}

PhiloxStream::PhiloxStream(uint64_t seed, uint32_t canvas, uint32_t step, DrawPurpose purpose, uint32_t position)
    : counter_{position, canvas, step, uint32_t(purpose) << kBlockIndexBits},
      key_{uint32_t(seed), uint32_t(seed >> 32)} {}

void PhiloxStream::refill() {
  // Unreachable in practice (a rejection loop rejects with probability < 1/2
  // per word), but a silent wrap would alias the purpose bits.
  if (block_index_ > kBlockIndexMask) throw Error("PhiloxStream: stream exhausted (2^28 blocks)");
  PhiloxCounter c = counter_;
  c[3] |= block_index_++;
  block_ = philox4x32_10(c, key_);
  used_ = 0;
}

uint32_t PhiloxStream::next_u32() {
  if (used_ == 4) refill();
  return block_[used_++];
}

uint32_t PhiloxStream::uniform_int(uint32_t n) {
  if (n == 0) throw Error("PhiloxStream::uniform_int: empty range [0, 0)");
  uint64_t m = uint64_t(next_u32()) * n;
  uint32_t low = uint32_t(m);
  if (low < n) {
    // 2^32 mod n values of the low word would make some results more likely;
    // redraw while we are in that band.
    const uint32_t threshold = uint32_t(-n) % n;
    while (low < threshold) {
      m = uint64_t(next_u32()) * n;
      low = uint32_t(m);
    }
  }
  return uint32_t(m >> 32);
}

float PhiloxStream::uniform_float() { return float(next_u32() >> 8) * 0x1.0p-24f; }

double PhiloxStream::uniform_double() {
  const uint64_t hi = next_u32() >> 5;  // 27 bits
  const uint64_t lo = next_u32() >> 6;  // 26 bits
  return double((hi << 26) | lo) * 0x1.0p-53;
}

uint64_t random_seed() {
  std::random_device rd;
  return ((uint64_t(rd()) << 32) | rd()) & kMaxExactJsonSeed;
}

}  // namespace dgemma

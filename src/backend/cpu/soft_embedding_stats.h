#pragma once
// What the CPU soft_embedding's sparse path did (backend/cpu/fast_soft_embedding.cc):
// how many canvas rows it summed sparsely, how many it left to the dense
// product, and how many vocabulary entries the sparse rows kept.
#include <array>
#include <cstdint>

namespace dgemma {

struct SoftEmbeddingStats {
  int64_t calls = 0;
  int64_t rows_sparse = 0;
  int64_t rows_dense = 0;               // the bound was not met, or too many entries carried mass
  int64_t kept_entries = 0;             // summed over sparse rows
  int64_t kept_max = 0;                 // the most entries one sparse row kept
  std::array<int64_t, 20> kept_log2{};  // sparse rows by kept count: bucket b holds [2^b, 2^(b+1)), last open
};

}  // namespace dgemma

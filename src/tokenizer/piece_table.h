#pragma once
// Id-indexed table of token strings ("pieces") with a piece -> id hash index.
// Pieces live in one contiguous blob so that loading 262k pieces does not
// allocate 262k strings (docs/formats.md §6.1: Gemma vocabularies are 262,144).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/zeroed_array.h"

namespace dgemma::tok {

class PieceTable {
 public:
  void reserve(size_t pieces, size_t bytes);
  // Adds `piece` under `id`. Returns false (and changes nothing) when the piece
  // or the id is already present.
  bool insert(std::string_view piece, int32_t id);
  // Id of `piece`, or -1.
  int32_t find(std::string_view piece) const;
  // find() for n pieces at once. Loading resolves ~1.5 M merge pieces and is
  // bound by cache misses on the hash table; staging the probes (hash and
  // prefetch all, then read) overlaps those misses.
  void find_batch(const std::string_view* pieces, int32_t* ids, size_t n) const;
  bool has_id(int32_t id) const { return id >= 0 && size_t(id) < entries_.size() && entries_[size_t(id)].len != kNone; }
  // The piece of `id` (has_id(id) must hold).
  std::string_view piece(int32_t id) const {
    const Entry& e = entries_[size_t(id)];
    return std::string_view(blob_.data() + e.offset, e.len);
  }
  // One past the largest id (ids may have holes).
  size_t id_bound() const { return entries_.size(); }
  size_t size() const { return count_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Entry {
    uint32_t offset = 0;
    uint32_t len = kNone;
  };
  struct Slot {
    uint32_t tag;      // high hash bits, to skip most piece comparisons
    uint32_t id_plus;  // id + 1; 0: empty (ZeroedArray starts all-empty)
  };
  void grow();
  void place(uint64_t h, int32_t id);
  int32_t find_hashed(std::string_view piece, uint64_t h) const;

  std::string blob_;
  std::vector<Entry> entries_;
  ZeroedArray<Slot> slots_;
  size_t count_ = 0;
};

}  // namespace dgemma::tok

#pragma once
// BPE merge ranks: (left id, right id) -> (rank, merged id), open addressing
// on a 64-bit key, no per-entry allocation.
//
// Encoding is bound by cache misses on this table (515k merges, 16 MB, probed
// at random), so after loading, two small structures answer most lookups
// without touching it (build_filters):
// * a 64-bit signature per left id, with one bit per hashed right id that has
//   a merge: most pairs without a merge stop here; frequent left symbols are
//   few, so the signatures read are mostly in L1/L2;
// * a hot table with the merges of rank < kHotRanks: BPE ranks follow
//   training frequency, so the merges a text uses are mostly low-ranked.
#include <cstdint>

#include "tokenizer/hash.h"
#include "tokenizer/zeroed_array.h"

namespace dgemma::tok {

class MergeTable {
 public:
  struct Entry {
    uint64_t key;  // 0 when free (see make_key)
    uint32_t rank;
    int32_t merged;
  };

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    if (cap <= slots_.size()) return;
    ZeroedArray<Entry> old = std::move(slots_);
    slots_ = ZeroedArray<Entry>(cap);
    count_ = 0;
    for (const Entry& e : old)
      if (e.key) insert_key(e.key, e.rank, e.merged);
  }
  // Inserts or overwrites (a later duplicate merge wins, as when the Rust
  // crate collects its merge list into a HashMap).
  void insert(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
    if ((count_ + 1) * 2 > slots_.size()) reserve(count_ + 1 > 8 ? count_ * 2 : 16);
    insert_key(make_key(left, right), rank, merged);
  }
  const Entry* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    uint64_t key = make_key(left, right);
    if (!signatures_.empty()) {
      if (size_t(left) >= signatures_.size() || !(signatures_[size_t(left)] & signature_bit(right))) return nullptr;
      if (const Entry* e = probe(hot_, key)) return e;
    }
    return probe(slots_, key);
  }
  // Builds the signatures and the hot table; call once all merges are in.
  void build_filters(size_t id_bound) {
    signatures_ = ZeroedArray<uint64_t>(id_bound);
    size_t hot = 0;
    for (const Entry& e : slots_) {
      if (!e.key) continue;
      signatures_[size_t((e.key >> 32) - 1)] |= signature_bit(int32_t(uint32_t(e.key)));
      hot += e.rank < kHotRanks;
    }
    size_t cap = 16;
    while (cap < hot * 2) cap <<= 1;
    hot_ = ZeroedArray<Entry>(cap);
    for (const Entry& e : slots_)
      if (e.key && e.rank < kHotRanks) insert_into(hot_, e.key, e.rank, e.merged);
  }
  // Hint that (left, right) is about to be inserted or looked up.
  void prefetch(int32_t left, int32_t right) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[size_t(mix64(make_key(left, right))) & (slots_.size() - 1)]);
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint32_t kHotRanks = 1 << 15;  // hot table: 64k slots, 1 MB
  static uint64_t signature_bit(int32_t right) { return uint64_t(1) << (mix64(uint64_t(uint32_t(right))) & 63); }
  static const Entry* probe(const ZeroedArray<Entry>& table, uint64_t key) {
    size_t mask = table.size() - 1;
    for (size_t i = size_t(mix64(key)) & mask;; i = (i + 1) & mask) {
      const Entry& e = table[i];
      if (e.key == key) return &e;
      if (e.key == 0) return nullptr;
    }
  }
  static bool insert_into(ZeroedArray<Entry>& table, uint64_t key, uint32_t rank, int32_t merged) {
    size_t mask = table.size() - 1;
    for (size_t i = size_t(mix64(key)) & mask;; i = (i + 1) & mask) {
      Entry& e = table[i];
      if (e.key == 0) {
        e = Entry{key, rank, merged};
        return true;
      }
      if (e.key == key) {
        e.rank = rank;
        e.merged = merged;
        return false;
      }
    }
  }
  // Ids are >= 0, so left + 1 makes every key non-zero.
  static uint64_t make_key(int32_t l, int32_t r) { return (uint64_t(uint32_t(l) + 1) << 32) | uint32_t(r); }
  void insert_key(uint64_t key, uint32_t rank, int32_t merged) {
    if (insert_into(slots_, key, rank, merged)) ++count_;
  }
  ZeroedArray<Entry> slots_;
  ZeroedArray<uint64_t> signatures_;
  ZeroedArray<Entry> hot_;
  size_t count_ = 0;
};

}  // namespace dgemma::tok

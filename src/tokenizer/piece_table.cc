#include "tokenizer/piece_table.h"

#include <algorithm>

#include "tokenizer/hash.h"

namespace dgemma::tok {

void PieceTable::reserve(size_t pieces, size_t bytes) {
  blob_.reserve(bytes);
  entries_.reserve(pieces);
  size_t cap = 16;
  while (cap < pieces + pieces / 2) cap <<= 1;
  if (cap > slots_.size()) {
    slots_ = ZeroedArray<Slot>(cap);
    for (size_t id = 0; id < entries_.size(); ++id)
      if (entries_[id].len != kNone) place(hash_bytes(piece(int32_t(id))), int32_t(id));
  }
}

void PieceTable::grow() {
  size_t cap = slots_.empty() ? 1024 : slots_.size() * 2;
  slots_ = ZeroedArray<Slot>(cap);
  for (size_t id = 0; id < entries_.size(); ++id)
    if (entries_[id].len != kNone) place(hash_bytes(piece(int32_t(id))), int32_t(id));
}

void PieceTable::place(uint64_t h, int32_t id) {
  size_t mask = slots_.size() - 1;
  size_t i = size_t(h) & mask;
  while (slots_[i].id_plus) i = (i + 1) & mask;
  slots_[i] = Slot{uint32_t(h >> 32), uint32_t(id) + 1};
}

bool PieceTable::insert(std::string_view piece_text, int32_t id) {
  if (id < 0 || has_id(id) || find(piece_text) >= 0) return false;
  if ((count_ + 1) * 10 > slots_.size() * 7) grow();  // keep the load factor <= 0.7
  if (size_t(id) >= entries_.size()) entries_.resize(size_t(id) + 1);
  entries_[size_t(id)] = Entry{uint32_t(blob_.size()), uint32_t(piece_text.size())};
  blob_.append(piece_text);
  place(hash_bytes(piece_text), id);
  ++count_;
  return true;
}

int32_t PieceTable::find(std::string_view piece_text) const {
  if (slots_.empty()) return -1;
  return find_hashed(piece_text, hash_bytes(piece_text));
}

void PieceTable::find_batch(const std::string_view* pieces, int32_t* ids, size_t n) const {
  constexpr size_t kChunk = 64;
  if (slots_.empty()) {
    for (size_t i = 0; i < n; ++i) ids[i] = -1;
    return;
  }
  uint64_t h[kChunk];
  size_t mask = slots_.size() - 1;
  for (size_t base = 0; base < n; base += kChunk) {
    size_t m = std::min(kChunk, n - base);
    for (size_t i = 0; i < m; ++i) {
      h[i] = hash_bytes(pieces[base + i]);
      __builtin_prefetch(&slots_[size_t(h[i]) & mask]);
    }
    for (size_t i = 0; i < m; ++i) {
      const Slot& s = slots_[size_t(h[i]) & mask];
      if (s.id_plus) __builtin_prefetch(&entries_[s.id_plus - 1]);
    }
    for (size_t i = 0; i < m; ++i) {
      const Slot& s = slots_[size_t(h[i]) & mask];
      if (s.id_plus) __builtin_prefetch(blob_.data() + entries_[s.id_plus - 1].offset);
    }
    for (size_t i = 0; i < m; ++i) ids[base + i] = find_hashed(pieces[base + i], h[i]);
  }
}

int32_t PieceTable::find_hashed(std::string_view piece_text, uint64_t h) const {
  uint32_t tag = uint32_t(h >> 32);
  size_t mask = slots_.size() - 1;
  for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (!s.id_plus) return -1;
    if (s.tag == tag && piece(int32_t(s.id_plus - 1)) == piece_text) return int32_t(s.id_plus - 1);
  }
}

}  // namespace dgemma::tok

#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "dgemma/error.h"
#include "tokenizer/hash.h"
#include "core/utf8.h"

namespace dgemma::tok {
namespace {

constexpr uint32_t kMeta = 0x2581;  // "▁", what Gemma's normalizer writes for " "
constexpr std::string_view kMetaUtf8 = "\xE2\x96\x81";
// Words of at most this many initial symbols are merged by a linear scan
// instead of a heap (same result, less overhead for typical words).
constexpr size_t kSmallWord = 24;

struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t units;  // initial symbols covered; 0 once merged into its left neighbour
};
struct Candidate {
  uint32_t rank;
  uint32_t pos;
  int32_t merged;
  uint32_t units;  // units of the pair when the candidate was made
};
// Min-heap order of Rust `Merge`: lowest rank first, then leftmost position.
struct Later {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

std::atomic<uint64_t> g_next_generation{1};

// Per-thread caches. They are private to a thread (no locks on the hot path)
// and tagged with the model's globally unique generation, so switching
// models or calling clear_cache() empties them.
//
// * Pair cache: the merge table is 16 MB and probed at random, so most
//   probes miss the CPU caches; a text's pairs repeat heavily across words,
//   and a small direct-mapped cache that stays in L2 answers most of them.
// * Word cache: word -> ids, for words up to kMaxWordBytes (Gemma words are
//   short once cut before "▁"); keys and ids live in two arenas.
class ThreadCaches {
 public:
  static constexpr size_t kMaxWordBytes = 64;

  static ThreadCaches& get(uint64_t generation) {
    thread_local ThreadCaches c;
    if (c.generation_ != generation) c.reset(generation);
    return c;
  }

  const MergeTable::Entry* find_pair(const MergeTable& table, int32_t left, int32_t right) {
    uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
    PairSlot& slot = pairs_[size_t(mix64(key)) & (kPairSlots - 1)];
    if (slot.key == key + 1) return slot.entry.merged >= 0 ? &slot.entry : nullptr;
    const MergeTable::Entry* e = table.find(left, right);
    slot.key = key + 1;  // 0 marks an empty slot
    slot.entry = e ? *e : MergeTable::Entry{0, 0, -1};
    return e;
  }

  // Starts loading the merge-table slot of a pair that is not cached here.
  void prefetch_pair(const MergeTable& table, int32_t left, int32_t right) const {
    uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
    if (pairs_[size_t(mix64(key)) & (kPairSlots - 1)].key != key + 1) table.prefetch(left, right);
  }

  // Appends the cached ids of `word` to `out`; false when not cached.
  bool find_word(std::string_view word, uint64_t h, std::vector<int32_t>& out) const {
    for (size_t i = size_t(h) & (kWordSlots - 1);; i = (i + 1) & (kWordSlots - 1)) {
      const WordSlot& s = words_[i];
      if (!s.len) return false;
      if (s.hash == h && std::string_view(keys_).substr(s.key_offset, s.len) == word) {
        out.insert(out.end(), ids_.begin() + std::ptrdiff_t(s.ids_offset),
                   ids_.begin() + std::ptrdiff_t(s.ids_offset + s.ids_count));
        return true;
      }
    }
  }
  void insert_word(std::string_view word, uint64_t h, const int32_t* ids, size_t n) {
    if (word_count_ * 2 >= kWordSlots || ids_.size() + n > UINT32_MAX) {
      words_.assign(kWordSlots, WordSlot{});
      keys_.clear();
      ids_.clear();
      word_count_ = 0;
    }
    size_t i = size_t(h) & (kWordSlots - 1);
    while (words_[i].len) i = (i + 1) & (kWordSlots - 1);
    words_[i] = WordSlot{h, uint32_t(keys_.size()), uint32_t(ids_.size()), uint16_t(word.size()), uint16_t(n)};
    keys_.append(word);
    ids_.insert(ids_.end(), ids, ids + n);
    ++word_count_;
  }

 private:
  static constexpr size_t kPairSlots = 1 << 14;  // x 24 B = 384 KB
  static constexpr size_t kWordSlots = 1 << 16;  // half-full at most: 32k words
  struct PairSlot {
    uint64_t key = 0;  // (left, right) + 1
    MergeTable::Entry entry{};
  };
  struct WordSlot {
    uint64_t hash = 0;
    uint32_t key_offset = 0, ids_offset = 0;
    uint16_t len = 0, ids_count = 0;  // len 0: empty
  };
  void reset(uint64_t generation) {
    generation_ = generation;
    pairs_.assign(kPairSlots, PairSlot{});
    words_.assign(kWordSlots, WordSlot{});
    keys_.clear();
    ids_.clear();
    word_count_ = 0;
  }
  uint64_t generation_ = 0;
  std::vector<PairSlot> pairs_;
  std::vector<WordSlot> words_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t word_count_ = 0;
};

}  // namespace

BpeModel::BpeModel() : generation_(g_next_generation.fetch_add(1)) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
}
BpeModel::~BpeModel() = default;

void BpeModel::note_merge_result(std::string_view merged) {
  for (size_t p = merged.find(kMetaUtf8); p != std::string_view::npos; p = merged.find(kMetaUtf8, p + 3)) {
    if (p == 0) continue;
    size_t q = prev_code_point_start(merged, p);
    uint32_t c = next_code_point(merged, q);
    if (c != kMeta && std::find(glue_.begin(), glue_.end(), c) == glue_.end()) glue_.push_back(c);
  }
}

void BpeModel::finalize(BpeOptions options, const std::string& source) {
  opt_ = std::move(options);
  if (opt_.has_unk) {
    unk_id_ = vocab_.find(opt_.unk_token);
    if (unk_id_ < 0) throw Error(source + ": model.unk_token \"" + opt_.unk_token + "\" is not in the vocabulary");
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);  // Rust format!("<{b:#04X}>")
    byte_ids_[b] = vocab_.find(name);
  }
  fast_chars_ = opt_.continuing_subword_prefix.empty() && opt_.end_of_word_suffix.empty();
  bmp_ids_.assign(fast_chars_ ? 0x10000 : 0, -1);
  if (fast_chars_) {
    for (size_t id = 0; id < vocab_.id_bound(); ++id) {
      if (!vocab_.has_id(int32_t(id))) continue;
      std::string_view p = vocab_.piece(int32_t(id));
      if (p.empty() || p.size() > 3 || utf8_len(static_cast<unsigned char>(p[0])) != p.size()) continue;
      size_t q = 0;
      uint32_t cp = next_code_point(p, q);
      if (cp < 0x10000) bmp_ids_[cp] = int32_t(id);
    }
  }
  // Cutting words before "▁" is exact only when the characters around the cut
  // are whole symbols: no subword prefix/suffix, and "▁" itself in the
  // vocabulary (so it never becomes bytes or a fused unk).
  cut_words_ = fast_chars_ && bmp_ids_[kMeta] >= 0;
  std::sort(glue_.begin(), glue_.end());
  merges_.build_filters(vocab_.id_bound());
  clear_cache();
}

bool BpeModel::cut_allowed_after(uint32_t cp) const {
  // The left side ends with the symbol of `cp` only if `cp` is a vocabulary
  // piece itself (not byte-fallback / unk); a merge across the cut would then
  // produce a piece containing "cp▁", which no merge does unless cp is glue.
  if (cp == kMeta || std::binary_search(glue_.begin(), glue_.end(), cp)) return false;
  if (cp < 0x10000) return bmp_ids_[cp] >= 0;
  std::string s;
  append_utf8(s, cp);
  return vocab_.find(s) >= 0;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (opt_.ignore_merges) {
    // Rust: with ignore_merges a word that is a piece is emitted directly.
    int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (!cut_words_) {
    tokenize_cached(word, out);
    return;
  }
  size_t start = 0;
  for (size_t p = word.find(kMetaUtf8, 1); p != std::string_view::npos; p = word.find(kMetaUtf8, p + 3)) {
    if (p <= start) continue;
    size_t q = prev_code_point_start(word, p);
    if (!cut_allowed_after(next_code_point(word, q))) continue;
    tokenize_cached(word.substr(start, p - start), out);
    start = p;
  }
  tokenize_cached(word.substr(start), out);
}

void BpeModel::tokenize_uncut(std::string_view word, std::vector<int32_t>& out) const {
  if (opt_.ignore_merges) {
    int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  merge_word(word, out);
}

void BpeModel::clear_cache() const { generation_.store(g_next_generation.fetch_add(1), std::memory_order_relaxed); }

void BpeModel::tokenize_cached(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > ThreadCaches::kMaxWordBytes) {
    merge_word(word, out);
    return;
  }
  ThreadCaches& caches = ThreadCaches::get(generation_.load(std::memory_order_relaxed));
  uint64_t h = hash_bytes(word);
  if (caches.find_word(word, h, out)) return;
  size_t first = out.size();
  merge_word(word, out);
  caches.insert_word(word, h, out.data() + first, out.size() - first);
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  // Mirrors Rust `BPE::merge_word` + `Word::merge_all` (dropout unsupported).
  thread_local std::vector<Symbol> syms;
  thread_local std::vector<Candidate> heap;
  thread_local std::string scratch;
  // One huge word (a prompt of 900,000 letters without a space) grows these
  // to tens of MB; a thread keeps at most kKeptSymbols of them afterwards, so
  // that such a request does not stay resident in every thread that saw one.
  struct Release {
    ~Release() {
      constexpr size_t kKeptSymbols = 1 << 14;
      if (syms.capacity() > kKeptSymbols) std::vector<Symbol>().swap(syms);
      if (heap.capacity() > kKeptSymbols) std::vector<Candidate>().swap(heap);
      if (scratch.capacity() > kKeptSymbols) std::string().swap(scratch);
    }
  } release;
  ThreadCaches& caches = ThreadCaches::get(generation_.load(std::memory_order_relaxed));
  auto find_pair = [&](int32_t l, int32_t r) { return caches.find_pair(merges_, l, r); };
  syms.clear();
  heap.clear();
  auto push = [&](int32_t id) {
    int32_t n = int32_t(syms.size());
    if (n > 0) syms.back().next = n;
    syms.push_back(Symbol{id, n - 1, -1, 1});
  };
  // A pending <unk> is emitted when the next vocabulary character arrives or
  // at the end; byte-fallback characters do not flush it (same order as the
  // Rust code, which only matters when some <0xXX> piece is missing).
  bool unk_pending = false;
  for (size_t i = 0; i < w.size();) {
    size_t begin = i;
    uint32_t cp = next_code_point(w, i);
    std::string_view s = w.substr(begin, i - begin);
    int32_t id;
    if (fast_chars_) {
      id = cp < 0x10000 ? bmp_ids_[cp] : vocab_.find(s);
    } else {
      scratch.clear();
      if (begin != 0) scratch += opt_.continuing_subword_prefix;
      scratch += s;
      if (i == w.size()) scratch += opt_.end_of_word_suffix;
      s = scratch;
      id = vocab_.find(s);
    }
    if (id >= 0) {
      if (unk_pending) push(unk_id_);
      unk_pending = false;
      push(id);
      continue;
    }
    if (opt_.byte_fallback) {
      bool all = true;
      for (unsigned char b : s) all = all && byte_ids_[b] >= 0;
      if (all) {
        for (unsigned char b : s) push(byte_ids_[b]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      // fuse_unk: consecutive unknown characters share one <unk>.
      if (unk_pending && !opt_.fuse_unk) push(unk_id_);
      unk_pending = true;
    }
    // Without an unk token the character is dropped, as in the reference.
  }
  if (unk_pending) push(unk_id_);

  // The initial pairs are all known now: overlap their table misses.
  for (size_t k = 0; k + 1 < syms.size(); ++k) caches.prefetch_pair(merges_, syms[k].id, syms[k + 1].id);

  if (syms.size() <= kSmallWord) {
    // Short words: repeatedly merge the lowest-ranked adjacent pair, leftmost
    // first, over a compact array. That is the order in which the heap below
    // (and Rust's BinaryHeap) pops its valid candidates, without the heap.
    int32_t ids[kSmallWord];
    uint32_t rank[kSmallWord];
    int32_t merged[kSmallWord];
    size_t n = syms.size();
    for (size_t k = 0; k < n; ++k) ids[k] = syms[k].id;
    auto pair_at = [&](size_t k) {
      const auto* m = find_pair(ids[k], ids[k + 1]);
      rank[k] = m ? m->rank : UINT32_MAX;
      merged[k] = m ? m->merged : -1;
    };
    for (size_t k = 0; k + 1 < n; ++k) pair_at(k);
    while (n > 1) {
      size_t best = 0;
      for (size_t k = 1; k + 1 < n; ++k)
        if (rank[k] < rank[best]) best = k;
      if (rank[best] == UINT32_MAX) break;
      ids[best] = merged[best];
      for (size_t k = best + 1; k + 1 < n; ++k) {
        ids[k] = ids[k + 1];
        rank[k] = rank[k + 1];
        merged[k] = merged[k + 1];
      }
      --n;
      if (best > 0) pair_at(best - 1);
      if (best + 1 < n) pair_at(best);
    }
    out.insert(out.end(), ids, ids + n);
    return;
  }

  for (size_t k = 0; k + 1 < syms.size(); ++k)
    if (const auto* m = find_pair(syms[k].id, syms[k + 1].id)) heap.push_back({m->rank, uint32_t(k), m->merged, 2});
  std::make_heap(heap.begin(), heap.end(), Later());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Later());
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& cur = syms[top.pos];
    if (!cur.units || cur.next < 0) continue;
    int32_t right_pos = cur.next;
    Symbol right = syms[size_t(right_pos)];
    // Rust re-looks the pair up and skips the candidate unless it still
    // yields the same merged id. Symbols only grow, and a grown pair spells a
    // longer string (so a different id): the candidate is current exactly
    // when the pair still covers the same number of units.
    if (cur.units + right.units != top.units) continue;
    cur.id = top.merged;
    cur.units += right.units;
    cur.next = right.next;
    syms[size_t(right_pos)].units = 0;
    if (right.next >= 0) syms[size_t(right.next)].prev = int32_t(top.pos);
    if (cur.prev >= 0) {
      const Symbol& p = syms[size_t(cur.prev)];
      if (const auto* pm = find_pair(p.id, cur.id)) {
        heap.push_back({pm->rank, uint32_t(cur.prev), pm->merged, p.units + cur.units});
        std::push_heap(heap.begin(), heap.end(), Later());
      }
    }
    if (cur.next >= 0) {
      const Symbol& n = syms[size_t(cur.next)];
      if (const auto* nm = find_pair(cur.id, n.id)) {
        heap.push_back({nm->rank, top.pos, nm->merged, cur.units + n.units});
        std::push_heap(heap.begin(), heap.end(), Later());
      }
    }
  }
  for (const Symbol& s : syms)
    if (s.units) out.push_back(s.id);
}

}  // namespace dgemma::tok

#pragma once
// The BPE model of tokenizer.json (HF tokenizers models/bpe): vocabulary,
// rank-ordered merges, byte_fallback, unk/fuse_unk, optional subword
// prefix/suffix, ignore_merges.
//
// Speed (targets: load <= 300 ms, encode >= 20 MB/s on one core):
// * merges are applied with a min-heap over (rank, position) and a linked
//   symbol list, O(n log n) per word — the same order as the Rust
//   `Word::merge_all`, so results are identical;
// * Gemma's pre-tokenizer leaves whole lines as one "word" (docs/formats.md §6.1).
//   We cut such a word before a "▁" whenever no merge can join the two sides
//   (checked against every merge result at load time, see segment_boundary),
//   which makes words short and lets a word cache work. The cut is exact, not
//   a heuristic: BPE on the pieces gives the same ids as BPE on the whole.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/merge_table.h"
#include "tokenizer/piece_table.h"

namespace dgemma::tok {

struct BpeOptions {
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::string unk_token;  // empty: no unk token
  bool has_unk = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
};

class BpeModel {
 public:
  BpeModel();
  ~BpeModel();
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // --- building (tokenizer_json.cc) ---
  PieceTable& vocab() { return vocab_; }
  MergeTable& merges() { return merges_; }
  // Records what a merge result looks like (for the word-cut analysis).
  void note_merge_result(std::string_view merged);
  // Call once after vocab, merges and options are set. Throws on an unk token
  // missing from the vocabulary. `source` names the file in errors.
  void finalize(BpeOptions options, const std::string& source);

  // --- use ---
  const PieceTable& vocab() const { return vocab_; }
  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  // Same without word cutting or the cache (reference path, for tests).
  void tokenize_uncut(std::string_view word, std::vector<int32_t>& out) const;
  void clear_cache() const;
  bool cuts_words() const { return cut_words_; }

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void tokenize_cached(std::string_view word, std::vector<int32_t>& out) const;
  bool cut_allowed_after(uint32_t cp) const;

  PieceTable vocab_;
  MergeTable merges_;
  BpeOptions opt_;
  int32_t unk_id_ = -1;
  int32_t byte_ids_[256];
  // Single-code-point pieces of the BMP (-1: none); used when there is no
  // subword prefix/suffix so a char lookup is one array read.
  std::vector<int32_t> bmp_ids_;
  bool fast_chars_ = false;
  // Word cutting: code points c != '▁' such that some merge result contains
  // "c▁" (Gemma 3: only '>', from the piece ">▁</").
  std::vector<uint32_t> glue_;
  bool cut_words_ = false;

  // Globally unique; renewed by clear_cache(). The per-thread word and pair
  // caches are valid only for the generation they were filled under.
  mutable std::atomic<uint64_t> generation_;
};

}  // namespace dgemma::tok

#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include "dgemma/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "core/utf8.h"

namespace dgemma {
namespace {

std::string read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot open tokenizer file: " + std::strerror(errno));
  std::string data;
  if (std::fseek(f, 0, SEEK_END) == 0) {
    long size = std::ftell(f);
    if (size > 0) data.reserve(size_t(size));
    std::fseek(f, 0, SEEK_SET);
  }
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw Error(path + ": read error");
  return data;
}

// Pre-tokenizes one normalized piece of text and runs BPE on each word.
void tokenize_normalized(const Tokenizer::Impl& t, std::string text, bool at_start, bool reference,
                         std::vector<int32_t>& ids) {
  if (text.empty()) return;
  auto bpe = [&](std::string_view word) {
    if (reference)
      t.model.tokenize_uncut(word, ids);
    else
      t.model.tokenize(word, ids);
  };
  if (t.pre_tokenizer.is_identity()) {
    bpe(text);
    return;
  }
  std::vector<tok::PreToken> words;
  words.push_back({std::move(text), at_start});
  t.pre_tokenizer.apply(words);
  for (const auto& w : words) bpe(w.text);
}

// One chunk of input between raw-matched added tokens
// (HF `AddedVocabulary::extract_and_normalize`, second half).
// `normalized_matcher`: the tokenizer's, or its plain one (no special tokens).
void tokenize_chunk(const Tokenizer::Impl& t, const tok::AddedTokenMatcher& normalized_matcher, std::string_view chunk,
                    bool at_start, bool reference, std::vector<int32_t>& ids) {
  std::string norm(chunk);
  t.normalizer.apply(norm);
  if (normalized_matcher.empty()) {
    tokenize_normalized(t, std::move(norm), at_start, reference, ids);
    return;
  }
  std::vector<tok::Segment> segs;
  normalized_matcher.split(norm, segs);
  for (const auto& s : segs) {
    if (s.id >= 0)
      ids.push_back(s.id);
    else
      tokenize_normalized(t, norm.substr(s.begin, s.end - s.begin), at_start && s.begin == 0, reference, ids);
  }
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
#if defined(__linux__)
  // Map the file instead of copying it: 14 MB less to copy and to zero.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open tokenizer file: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    size_t size = size_t(st.st_size);
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    ::close(fd);
    if (p != MAP_FAILED) {
      struct Unmap {
        void* p;
        size_t n;
        ~Unmap() { ::munmap(p, n); }
      } unmap{p, size};
      return from_json(std::string_view(static_cast<const char*>(p), size), path);
    }
  } else {
    ::close(fd);
  }
#endif
  return from_json(read_file(path), path);
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  return Tokenizer(tok::parse_tokenizer_json(json_text, source));
}

Tokenizer Tokenizer::from_arrays(const TokenizerArrays& arrays) { return Tokenizer(tok::build_from_arrays(arrays)); }

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  const TextPiece piece{text, true};
  return encode_impl({&piece, 1}, add_special, false);
}

std::vector<int32_t> Tokenizer::encode_plain(std::string_view text, bool add_special) const {
  const TextPiece piece{text, false};
  return encode_impl({&piece, 1}, add_special, false);
}

std::vector<int32_t> Tokenizer::encode_pieces(std::span<const TextPiece> pieces, bool add_special) const {
  return encode_impl(pieces, add_special, false);
}

std::vector<int32_t> Tokenizer::encode_reference(std::string_view text, bool add_special) const {
  const TextPiece piece{text, true};
  return encode_impl({&piece, 1}, add_special, true);
}

std::vector<int32_t> Tokenizer::encode_impl(std::span<const TextPiece> pieces, bool add_special, bool reference) const {
  const Impl& t = *impl_;
  size_t total = 0;
  for (const TextPiece& p : pieces) {
    if (size_t bad = find_invalid_utf8(p.text); bad != std::string_view::npos)
      throw Error("tokenizer: cannot encode text that is not valid UTF-8 (invalid byte 0x" +
                  [&] {
                    char b[4];
                    std::snprintf(b, sizeof b, "%02X", unsigned(static_cast<unsigned char>(p.text[bad])));
                    return std::string(b);
                  }() +
                  " at offset " + std::to_string(total + bad) + ")");
    total += p.text.size();
  }
  // One piece is encoded in place; several are joined and split as one text
  // in which special tokens may not match inside the plain pieces' bytes.
  std::string joined;
  std::string_view text = pieces.size() == 1 ? pieces[0].text : std::string_view();
  if (pieces.size() > 1) {
    joined.reserve(total);
    for (const TextPiece& p : pieces) joined += p.text;
    text = joined;
  }
  std::vector<std::pair<size_t, size_t>> plain;  // byte ranges of the plain pieces
  size_t offset = 0;
  for (const TextPiece& p : pieces) {
    if (!p.special_tokens && !p.text.empty()) {
      if (!plain.empty() && plain.back().second == offset)
        plain.back().second += p.text.size();
      else
        plain.emplace_back(offset, offset + p.text.size());
    }
    offset += p.text.size();
  }
  std::vector<tok::Segment> segs;
  if (t.raw_matcher.empty())
    segs.push_back({0, text.size(), -1});
  else
    t.raw_matcher.split(text, segs, plain);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special) ids = t.post_processor.prefix();
  for (const tok::Segment& seg : segs) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    // Normalized added tokens are matched after the normalizer, where byte
    // offsets differ: a chunk touching plain text matches no special one.
    const bool touches_plain = std::any_of(plain.begin(), plain.end(), [&](const std::pair<size_t, size_t>& r) {
      return r.first < seg.end && seg.begin < r.second;
    });
    const tok::AddedTokenMatcher& normalized = touches_plain ? t.normalized_plain_matcher : t.normalized_matcher;
    tokenize_chunk(t, normalized, text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, reference, ids);
  }
  if (add_special) ids.insert(ids.end(), t.post_processor.suffix().begin(), t.post_processor.suffix().end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& t = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || size_t(id) >= t.pieces.size() || !(t.flags[size_t(id)] & Impl::kPresent))
      throw Error("tokenizer: cannot decode token id " + std::to_string(id) + ": " +
                  (id < 0 || size_t(id) >= t.pieces.size()
                       ? "out of range (the vocabulary has " + std::to_string(t.pieces.size()) + " ids)"
                       : std::string("no token has this id")));
    if (skip_special && (t.flags[size_t(id)] & Impl::kSpecial)) continue;
    tokens.emplace_back(t.pieces[size_t(id)]);
  }
  return t.decoder.decode(std::move(tokens));
}

int32_t Tokenizer::token_id(std::string_view content) const {
  int32_t id = impl_->added_index.find(content);
  return id >= 0 ? id : impl_->model.vocab().find(content);
}

std::string_view Tokenizer::id_to_piece(int32_t id) const {
  const Impl& t = *impl_;
  if (id < 0 || size_t(id) >= t.pieces.size() || !(t.flags[size_t(id)] & Impl::kPresent))
    throw Error("tokenizer: token id " + std::to_string(id) + " is not in the vocabulary (" +
                std::to_string(t.pieces.size()) + " ids)");
  return t.pieces[size_t(id)];
}

size_t Tokenizer::vocab_size() const { return impl_->pieces.size(); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->flags.size() && (impl_->flags[size_t(id)] & Impl::kSpecial);
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->flags.size() && (impl_->flags[size_t(id)] & Impl::kAdded);
}

void Tokenizer::clear_cache() const { impl_->model.clear_cache(); }

const std::string& Tokenizer::source() const { return impl_->source; }

}  // namespace dgemma

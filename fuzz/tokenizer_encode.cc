// libFuzzer target for the tokenizer (src/tokenizer/), on the Gemma 3
// tokenizer.json of tests/data/tokenizer/.
//
// Input: first byte = mode, rest = payload.
// * encode mode: the payload is text. Invalid UTF-8 must be rejected with
//   dgemma::Error (documented behaviour: the reference only takes strings);
//   valid text must encode, agree with the reference algorithm (no word
//   cutting, no cache), get exactly one <bos> with add_special, and decode
//   back to the input with "▁" read as a space (Gemma: every character is
//   covered by a piece or by byte fallback; literal "▁" decodes as " ");
//   encode_plain must give no special id and decode back the same way, and
//   encode_pieces of the two halves must equal encode.
// * decode mode: the payload is read as ids (3 bytes each, spread over a bit
//   more than the vocabulary). In-range ids must decode to valid UTF-8,
//   out-of-range ids must throw dgemma::Error.
//
//   build-tok-fuzz/fuzz_tokenizer_encode -max_total_time=60 -max_len=4096
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "support/source_dir.h"
#include "dgemma/error.h"
#include "tokenizer/tokenizer.h"

namespace {

const dgemma::Tokenizer& tokenizer() {
  static const dgemma::Tokenizer tok =
      dgemma::Tokenizer::load(std::string(DGEMMA_SOURCE_DIR) + "/tests/data/tokenizer/tokenizer.json");
  return tok;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz check failed: %s\n", what);
    std::abort();
  }
}

std::string spaces_for_meta(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void fuzz_encode(const dgemma::Tokenizer& tok, std::string_view text, uint8_t mode) {
  bool valid = dgemma::json::is_valid_utf8(text);
  std::vector<int32_t> ids;
  try {
    if (mode & 2) tok.clear_cache();
    ids = tok.encode(text, false);
  } catch (const dgemma::Error&) {
    check(!valid, "valid UTF-8 was rejected");
    return;
  }
  check(valid, "invalid UTF-8 was accepted");
  check(tok.encode_reference(text, false) == ids, "word cutting changed the ids");
  auto with_bos = tok.encode(text, true);
  check(
      with_bos.size() == ids.size() + 1 && with_bos[0] == 2 && std::equal(ids.begin(), ids.end(), with_bos.begin() + 1),
      "add_special is not <bos> + ids");
  check(tok.decode(ids) == spaces_for_meta(text), "decode(encode(text)) != text");
  // Special-token text as plain text: no special id, same characters.
  const std::vector<int32_t> plain = tok.encode_plain(text, false);
  check(std::none_of(plain.begin(), plain.end(), [&](int32_t id) { return tok.is_special(id); }),
        "encode_plain produced a special token");
  check(tok.decode(plain) == spaces_for_meta(text), "decode(encode_plain(text)) != text");
  // Pieces that all allow special tokens encode like the joined text.
  size_t cut = text.size() / 2;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  const dgemma::Tokenizer::TextPiece pieces[] = {{text.substr(0, cut), true}, {text.substr(cut), true}};
  check(tok.encode_pieces(pieces, false) == ids, "encode_pieces of two halves != encode");
}

void fuzz_decode(const dgemma::Tokenizer& tok, std::string_view data, uint8_t mode) {
  const int64_t n = int64_t(tok.vocab_size());
  std::vector<int32_t> ids;
  bool in_range = true;
  for (size_t i = 0; i + 3 <= data.size(); i += 3) {
    int64_t raw = int64_t(uint8_t(data[i])) | int64_t(uint8_t(data[i + 1])) << 8 | int64_t(uint8_t(data[i + 2])) << 16;
    // Mostly byte tokens (238..493) and small ids, sometimes anything.
    int64_t id = (mode & 4) ? 238 + raw % 256 : raw % (n + 32) - 16;
    in_range = in_range && id >= 0 && id < n;
    ids.push_back(int32_t(id));
  }
  try {
    std::string text = tok.decode(ids, mode & 8);
    check(in_range, "an out-of-range id decoded");
    check(dgemma::json::is_valid_utf8(text), "decode produced invalid UTF-8");
  } catch (const dgemma::Error&) {
    check(!in_range, "decoding in-range ids threw");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const dgemma::Tokenizer& tok = tokenizer();
  uint8_t mode = data[0];
  std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode & 1)
    fuzz_decode(tok, payload, mode);
  else
    fuzz_encode(tok, payload, mode);
  return 0;
}

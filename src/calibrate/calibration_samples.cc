#include "calibrate/calibration_samples.h"

#include <openssl/evp.h>

#include <memory>
#include <string_view>

#include "core/json.h"
#include "dgemma/error.h"
#include "tokenizer/token_id_list.h"

namespace dgemma {
namespace {

// Non-empty lines with their 1-based numbers.
template <class Fn>
void for_each_line(const std::string& content, Fn&& fn) {
  size_t at = 0;
  int64_t number = 0;
  while (at <= content.size()) {
    size_t end = content.find('\n', at);
    if (end == std::string::npos) end = content.size();
    std::string_view line(content.data() + at, end - at);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) fn(line, number);
    at = end + 1;
  }
}

bool starts_with_object(const std::string& content) {
  const size_t first = content.find_first_not_of(" \t\r\n");
  return first != std::string::npos && content[first] == '{';
}

json::Value line_object(std::string_view line, const std::string& where) {
  json::ParseOptions po;
  po.source = where;
  json::Value v = json::parse(line, po);
  if (!v.is_object()) throw Error(where + ": expected a JSON object");
  return v;
}

std::string where(const std::string& file, int64_t line) { return file + ":" + std::to_string(line); }

}  // namespace

std::vector<std::string> read_calibration_texts(const std::string& content, const std::string& file) {
  std::vector<std::string> texts;
  const bool jsonl = starts_with_object(content);
  for_each_line(content, [&](std::string_view line, int64_t number) {
    if (!jsonl) {
      texts.emplace_back(line);
      return;
    }
    const std::string at = where(file, number);
    const json::Value v = line_object(line, at);
    const json::Value* text = v.find("text");
    if (!text) throw Error(at + ": the object has no \"text\" field");
    texts.push_back(text->as_string(at + ": \"text\""));
  });
  if (texts.empty()) throw Error(file + ": no calibration samples (the file holds no non-empty line)");
  return texts;
}

std::vector<std::vector<int32_t>> read_calibration_ids(const std::string& content, const std::string& file,
                                                       int64_t vocab_size) {
  std::vector<std::vector<int32_t>> samples;
  for_each_line(content, [&](std::string_view line, int64_t number) {
    const std::string at = where(file, number);
    std::vector<int32_t> ids;
    if (line.find('{') != std::string_view::npos) {
      const json::Value v = line_object(line, at);
      const json::Value* list = v.find("ids");
      if (!list) throw Error(at + ": the object has no \"ids\" field");
      for (const json::Value& x : list->as_array(at + ": \"ids\"")) {
        const int64_t id = x.as_int(at + ": \"ids\"");
        if (id < INT32_MIN || id > INT32_MAX) throw Error(at + ": token id " + std::to_string(id) + " is out of range");
        ids.push_back(int32_t(id));
      }
    } else {
      ids = parse_token_id_list(line, at);
    }
    for (size_t k = 0; k < ids.size(); ++k)
      if (ids[k] < 0 || ids[k] >= vocab_size)
        throw Error(at + ": token id " + std::to_string(ids[k]) + " (item " + std::to_string(k + 1) +
                    ") is out of range [0, " + std::to_string(vocab_size) + ")");
    samples.push_back(std::move(ids));
  });
  if (samples.empty()) throw Error(file + ": no calibration samples (the file holds no non-empty line)");
  return samples;
}

std::vector<std::vector<int32_t>> fit_calibration_samples(std::vector<std::vector<int32_t>> samples,
                                                          int64_t max_samples, int64_t seq_len,
                                                          const std::string& file) {
  if (max_samples < 1) throw Error("calibration: the sample count must be at least 1");
  if (seq_len < 1) throw Error("calibration: the sequence length must be at least 1");
  std::vector<std::vector<int32_t>> out;
  for (std::vector<int32_t>& s : samples) {
    if (int64_t(out.size()) == max_samples) break;
    if (s.empty()) continue;
    if (int64_t(s.size()) > seq_len) s.resize(size_t(seq_len));
    out.push_back(std::move(s));
  }
  if (out.empty()) throw Error(file + ": every calibration sample is empty (no tokens)");
  return out;
}

std::vector<int32_t> calibration_canvas(uint64_t seed, uint64_t sample, int64_t length, int64_t vocab_size) {
  if (vocab_size < 1 || length < 0) throw Error("calibration canvas: bad length or vocabulary size");
  std::vector<int32_t> canvas(static_cast<size_t>(length));
  for (int64_t k = 0; k < length; ++k) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + sample * uint64_t(length) + uint64_t(k);
    // splitmix64's output function (Steele, Lea and Flood, 2014).
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    canvas[size_t(k)] = int32_t(z % uint64_t(vocab_size));
  }
  return canvas;
}

std::string calibration_set_sha256(const std::vector<std::vector<int32_t>>& samples) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("SHA-256: cannot initialise");
  auto put = [&](uint32_t v) {
    const unsigned char b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
    EVP_DigestUpdate(ctx.get(), b, 4);
  };
  for (const std::vector<int32_t>& s : samples) {
    put(uint32_t(s.size()));
    for (int32_t id : s) put(uint32_t(id));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &n) != 1) throw Error("SHA-256: cannot finish");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

}  // namespace dgemma

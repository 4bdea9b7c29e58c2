#include "tokenizer/token_id_list.h"

#include <charconv>

#include "dgemma/error.h"

namespace dgemma {

std::vector<int32_t> parse_token_id_list(std::string_view text, const std::string& what) {
  std::vector<int32_t> ids;
  auto separator = [](char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '[' || c == ']';
  };
  size_t i = 0;
  while (i < text.size()) {
    if (separator(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && !separator(text[end])) ++end;
    const std::string_view item = text.substr(i, end - i);
    int32_t v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || ptr != item.data() + item.size())
      throw Error(what + ": '" + std::string(item.substr(0, 40)) + "' is not a token id");
    ids.push_back(v);
    i = end;
  }
  return ids;
}

}  // namespace dgemma

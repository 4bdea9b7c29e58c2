#pragma once
// Token ids written as text, the way `dgemma tokenize` prints them: numbers
// separated by spaces, tabs, commas or line breaks, optionally inside
// brackets ("1 2 3", "1, 2, 3", "[1,2,3]").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dgemma {

// Throws dgemma::Error naming `what` and the first item that is not an
// int32 number.
std::vector<int32_t> parse_token_id_list(std::string_view text, const std::string& what);

}  // namespace dgemma

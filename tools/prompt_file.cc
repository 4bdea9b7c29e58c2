#include "prompt_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "dgemma/error.h"

namespace dgemma::cli {

std::string without_final_line_breaks(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

std::string read_prompt_file(const std::string& path) {
  if (path == "-") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (std::cin.bad()) throw Error("-f -: cannot read stdin");
    return without_final_line_breaks(std::move(text));
  }
  // Any readable file, pipes too (`-f <(command)`), but not a folder.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("-f/--file " + path + ": is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("-f/--file " + path + ": cannot open: " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("-f/--file " + path + ": read error");
  return without_final_line_breaks(std::move(text));
}

}  // namespace dgemma::cli

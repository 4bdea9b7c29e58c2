#pragma once
// -f/--file FILE of `run` and `chat`: a prompt read from a file (llama.cpp's
// flag), so that long or multi-line prompts need no shell quoting.
#include <string>

namespace dgemma::cli {

// The text of `path` ("-": all of stdin) without its final line breaks, as
// `-p "$(cat FILE)"` would give it; a file that cannot be read is an error
// naming it.
std::string read_prompt_file(const std::string& path);

// `text` without its final "\n" and "\r\n" line breaks.
std::string without_final_line_breaks(std::string text);

}  // namespace dgemma::cli

#pragma once
// Minimal flag parser shared by the subcommands: `-m DIR`, `--model DIR`,
// `--model=DIR`, boolean switches, positional arguments, generated --help with
// defaults. Unknown flags and bad values are errors naming the flag.
#include <cstdint>
#include <string>
#include <vector>

#include "cli.h"
#include "dgemma/error.h"

namespace dgemma::cli {

// A command-line mistake (unknown option or command, missing or malformed
// value): main() prints it and exits with 2, like getopt-based tools; other
// errors exit with 1.
class UsageError : public Error {
 public:
  using Error::Error;
};

class FlagParser {
 public:
  FlagParser(std::string usage, std::string description);
  // `names` is a comma-separated list of spellings, e.g. "-m,--model".
  void add_string(const std::string& names, std::string* target, const std::string& help,
                  const std::string& value_name = "VALUE");
  // Repeatable string flag: every occurrence is appended.
  void add_strings(const std::string& names, std::vector<std::string>* target, const std::string& help,
                   const std::string& value_name = "VALUE");
  void add_int(const std::string& names, int64_t* target, const std::string& help);
  void add_double(const std::string& names, double* target, const std::string& help);
  void add_bool(const std::string& names, bool* target, const std::string& help);

  // Parses; returns false when --help was given (help already printed to
  // stdout). Positional arguments are stored in positional().
  bool parse(const Args& args);
  const std::vector<std::string>& positional() const { return positional_; }
  // Whether a flag (by any of its spellings) was given explicitly.
  bool given(const std::string& name) const;
  std::string help_text() const;

 private:
  enum class Kind { kString, kStrings, kInt, kDouble, kBool };
  struct Flag {
    std::vector<std::string> names;
    Kind kind;
    void* target;
    std::string help;
    std::string value_name;
    std::string default_text;
    bool seen = false;
  };
  Flag* lookup(const std::string& name);
  void add(const std::string& names, Kind kind, void* target, const std::string& help, const std::string& value_name,
           std::string default_text);

  std::string usage_;
  std::string description_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
};

// Parses "1,2,3" into integers; `what` names the flag in errors (UsageError).
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);

}  // namespace dgemma::cli

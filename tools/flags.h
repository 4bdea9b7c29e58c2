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
  // An integer flag whose value must lie in [min, max]; a value outside is a
  // usage error naming the flag and the range (checked while parsing).
  void add_int(const std::string& names, int64_t* target, const std::string& help, int64_t min,
               int64_t max = INT64_MAX);
  // A string flag whose value must be one of `choices`; anything else is a
  // usage error listing them (with the closest spelling as a hint). `help`
  // should name the choices.
  void add_choice(const std::string& names, std::string* target, const std::string& help,
                  std::vector<std::string> choices, const std::string& value_name = "VALUE");
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
    Kind kind = Kind::kString;
    void* target = nullptr;
    std::string help;
    std::string value_name;
    std::string default_text;
    int64_t min = INT64_MIN, max = INT64_MAX;  // kInt
    std::vector<std::string> choices;          // kString: empty = any value
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

// A flag's value read by a parser of a lower layer (sizes, device lists,
// strategies, formats) that throws dgemma::Error: its error becomes a
// UsageError (exit 2) prefixed with the flag (when `flag` is not empty), since
// the value is the user's.
template <class Parse>
auto parse_flag_value(const std::string& flag, Parse&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(flag.empty() ? std::string(e.what()) : "option " + flag + ": " + e.what());
  }
}

// "a, b or c": the choices of a flag, for messages.
std::string choice_list(const std::vector<std::string>& choices);

}  // namespace dgemma::cli

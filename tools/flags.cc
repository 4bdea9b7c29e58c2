#include "flags.h"

#include <charconv>
#include <cstdio>
#include <sstream>

#include "dgemma/error.h"
#include "output.h"
#include "suggest.h"

namespace dgemma::cli {
namespace {
std::vector<std::string> split_names(const std::string& names) {
  std::vector<std::string> out;
  std::stringstream ss(names);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}
int64_t to_int(const std::string& s, const std::string& flag) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw UsageError("option " + flag + ": expected an integer, got '" + s + "'");
  return v;
}
double to_double(const std::string& s, const std::string& flag) {
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw UsageError("option " + flag + ": expected a number, got '" + s + "'");
  return v;
}
int64_t to_int_in(const std::string& s, const std::string& flag, int64_t min, int64_t max) {
  const int64_t v = to_int(s, flag);
  if (v >= min && v <= max) return v;
  std::string range;
  if (max == INT64_MAX)
    range = "an integer >= " + std::to_string(min);
  else if (min == INT64_MIN)
    range = "an integer <= " + std::to_string(max);
  else
    range = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  throw UsageError("option " + flag + ": expected " + range + ", got " + s);
}
std::string fmt_double(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

void check_choice(const std::vector<std::string>& choices, const std::string& flag, const std::string& value) {
  if (choices.empty()) return;
  for (const auto& c : choices)
    if (c == value) return;
  throw UsageError("option " + flag + ": expected " + choice_list(choices) + ", got '" + value + "'" +
                   did_you_mean(value, choices));
}
}  // namespace

std::string choice_list(const std::vector<std::string>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i)
    out += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return out;
}

FlagParser::FlagParser(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {}

void FlagParser::add(const std::string& names, Kind kind, void* target, const std::string& help,
                     const std::string& value_name, std::string default_text) {
  Flag f;
  f.names = split_names(names);
  f.kind = kind;
  f.target = target;
  f.help = help;
  f.value_name = value_name;
  f.default_text = std::move(default_text);
  flags_.push_back(std::move(f));
}
void FlagParser::add_string(const std::string& names, std::string* target, const std::string& help,
                            const std::string& value_name) {
  add(names, Kind::kString, target, help, value_name, *target);
}
void FlagParser::add_strings(const std::string& names, std::vector<std::string>* target, const std::string& help,
                             const std::string& value_name) {
  add(names, Kind::kStrings, target, help, value_name, "");
}
void FlagParser::add_int(const std::string& names, int64_t* target, const std::string& help) {
  add(names, Kind::kInt, target, help, "N", std::to_string(*target));
}
void FlagParser::add_int(const std::string& names, int64_t* target, const std::string& help, int64_t min, int64_t max) {
  add(names, Kind::kInt, target, help, "N", std::to_string(*target));
  flags_.back().min = min;
  flags_.back().max = max;
}
void FlagParser::add_choice(const std::string& names, std::string* target, const std::string& help,
                            std::vector<std::string> choices, const std::string& value_name) {
  add(names, Kind::kString, target, help, value_name, *target);
  flags_.back().choices = std::move(choices);
}
void FlagParser::add_double(const std::string& names, double* target, const std::string& help) {
  add(names, Kind::kDouble, target, help, "X", fmt_double(*target));
}
void FlagParser::add_bool(const std::string& names, bool* target, const std::string& help) {
  add(names, Kind::kBool, target, help, "", "");
}

FlagParser::Flag* FlagParser::lookup(const std::string& name) {
  for (auto& f : flags_)
    for (const auto& n : f.names)
      if (n == name) return &f;
  return nullptr;
}

bool FlagParser::given(const std::string& name) const {
  for (const auto& f : flags_)
    for (const auto& n : f.names)
      if (n == name) return f.seen;
  return false;
}

std::string FlagParser::help_text() const {
  std::string out = "usage: " + usage_ + "\n\n" + description_ + "\n";
  if (!flags_.empty()) out += "\noptions:\n";
  for (const auto& f : flags_) {
    std::string left = "  ";
    for (size_t i = 0; i < f.names.size(); ++i) left += (i ? ", " : "") + f.names[i];
    if (f.kind != Kind::kBool) left += " " + f.value_name;
    std::string line = left;
    if (line.size() < 30)
      line.append(30 - line.size(), ' ');
    else
      line += "\n" + std::string(30, ' ');
    line += f.help;
    if (!f.default_text.empty()) line += " (default: " + f.default_text + ")";
    out += line + "\n";
  }
  out += "  -h, --help                  show this help\n";
  return out;
}

bool FlagParser::parse(const Args& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(help_text().c_str(), stdout);
      check_output(stdout);
      return false;
    }
    if (a.size() < 2 || a[0] != '-' || a == "-" || (a[1] >= '0' && a[1] <= '9')) {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      for (++i; i < args.size(); ++i) positional_.push_back(args[i]);
      break;
    }
    std::string name = a, value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    Flag* f = lookup(name);
    if (!f) {
      std::vector<std::string> names;
      for (const auto& known : flags_) names.insert(names.end(), known.names.begin(), known.names.end());
      names.push_back("--help");
      const std::string hint = did_you_mean(name, names);
      throw UsageError("unknown option '" + name + "'" + (hint.empty() ? " (see --help)" : hint));
    }
    f->seen = true;
    if (f->kind == Kind::kBool) {
      if (has_value) {
        if (value == "true" || value == "1")
          *static_cast<bool*>(f->target) = true;
        else if (value == "false" || value == "0")
          *static_cast<bool*>(f->target) = false;
        else
          throw UsageError("option " + name + ": expected true/false, got '" + value + "'");
      } else {
        *static_cast<bool*>(f->target) = true;
      }
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) throw UsageError("option " + name + " needs a value");
      value = args[++i];
    }
    switch (f->kind) {
      case Kind::kString:
        check_choice(f->choices, name, value);
        *static_cast<std::string*>(f->target) = value;
        break;
      case Kind::kStrings: static_cast<std::vector<std::string>*>(f->target)->push_back(value); break;
      case Kind::kInt: *static_cast<int64_t*>(f->target) = to_int_in(value, name, f->min, f->max); break;
      case Kind::kDouble: *static_cast<double*>(f->target) = to_double(value, name); break;
      case Kind::kBool: break;
    }
  }
  return true;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) throw UsageError(what + ": empty element in list '" + text + "'");
    out.push_back(to_int(item.substr(b, e - b + 1), what));
  }
  return out;
}

}  // namespace dgemma::cli

#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "dgemma/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"

namespace dgemma::tok {

std::vector<std::pair<size_t, size_t>> split_on(std::string_view text, std::string_view pattern, SplitBehavior behavior,
                                                bool invert) {
  // Matches cover the whole text as alternating (span, is_match) runs, like
  // Rust `Pattern::find_matches` for an escaped literal.
  struct Run {
    size_t b, e;
    bool match;
  };
  std::vector<Run> runs;
  if (pattern.empty() || text.empty()) {
    runs.push_back({0, text.size(), false});
  } else {
    size_t prev = 0;
    for (size_t hit = text.find(pattern); hit != std::string_view::npos;
         hit = text.find(pattern, hit + pattern.size())) {
      if (hit != prev) runs.push_back({prev, hit, false});
      runs.push_back({hit, hit + pattern.size(), true});
      prev = hit + pattern.size();
    }
    if (prev != text.size()) runs.push_back({prev, text.size(), false});
  }
  if (invert)
    for (Run& r : runs) r.match = !r.match;

  // (span, remove) per Rust `NormalizedString::split`.
  std::vector<Run> out;  // `match` reused as "remove"
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Run& r : runs) out.push_back({r.b, r.e, false});
      break;
    case SplitBehavior::kRemoved: out = runs; break;
    case SplitBehavior::kContiguous: {
      bool previous = false;
      for (const Run& r : runs) {
        if (r.match == previous && !out.empty())
          out.back().e = r.e;
        else
          out.push_back({r.b, r.e, false});
        previous = r.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (const Run& r : runs) {
        if (r.match && !previous && !out.empty())
          out.back().e = r.e;
        else
          out.push_back({r.b, r.e, false});
        previous = r.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (size_t i = runs.size(); i-- > 0;) {
        const Run& r = runs[i];
        if (r.match && !previous && !out.empty())
          out.back().b = r.b;
        else
          out.push_back({r.b, r.e, false});
        previous = r.match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
  }
  std::vector<std::pair<size_t, size_t>> pieces;
  for (const Run& r : out)
    if (!r.match && r.e > r.b) pieces.emplace_back(r.b, r.e);
  return pieces;
}

PreTokenizer PreTokenizer::from_json(const json::Value& v, const std::string& source) {
  PreTokenizer p;
  if (!v.is_null()) p.add(v, source);
  return p;
}

void PreTokenizer::add(const json::Value& v, const std::string& source) {
  const std::string& type = field(v, source + ": pre_tokenizer", "type").as_string(source + ": pre_tokenizer.type");
  std::string what = source + ": pre_tokenizer \"" + type + "\"";
  if (type == "Sequence") {
    check_fields(v, what, {"type", "pretokenizers"});
    for (const auto& child : field(v, what, "pretokenizers").as_array(what + " pretokenizers")) add(child, source);
  } else if (type == "Split") {
    check_fields(v, what, {"type", "pattern", "behavior", "invert"});
    Step s{Step::Kind::kSplit, string_pattern(field(v, what, "pattern"), what)};
    const std::string& b = field(v, what, "behavior").as_string(what + " behavior");
    if (b == "Removed")
      s.behavior = SplitBehavior::kRemoved;
    else if (b == "Isolated")
      s.behavior = SplitBehavior::kIsolated;
    else if (b == "MergedWithPrevious")
      s.behavior = SplitBehavior::kMergedWithPrevious;
    else if (b == "MergedWithNext")
      s.behavior = SplitBehavior::kMergedWithNext;
    else if (b == "Contiguous")
      s.behavior = SplitBehavior::kContiguous;
    else
      throw Error(what + ": behavior \"" + b + "\" is not supported");
    if (const auto* inv = optional_field(v, "invert")) s.invert = inv->as_bool(what + " invert");
    steps_.push_back(std::move(s));
  } else if (type == "Metaspace") {
    check_fields(v, what, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
    Step s{Step::Kind::kMetaspace, single_char(field(v, what, "replacement"), what + " replacement")};
    bool have_scheme = false;
    if (const auto* ps = optional_field(v, "prepend_scheme")) {
      const std::string& name = ps->as_string(what + " prepend_scheme");
      if (name == "always")
        s.prepend = Step::Prepend::kAlways;
      else if (name == "first")
        s.prepend = Step::Prepend::kFirst;
      else if (name == "never")
        s.prepend = Step::Prepend::kNever;
      else
        throw Error(what + ": prepend_scheme \"" + name + "\" is not supported");
      have_scheme = true;
    }
    // Legacy files: add_prefix_space=false means prepend_scheme "never".
    if (const auto* aps = optional_field(v, "add_prefix_space"); aps && !aps->as_bool(what + " add_prefix_space")) {
      if (have_scheme && s.prepend != Step::Prepend::kNever)
        throw Error(what + ": add_prefix_space=false contradicts prepend_scheme");
      s.prepend = Step::Prepend::kNever;
    }
    if (const auto* sp = optional_field(v, "split")) s.split = sp->as_bool(what + " split");
    steps_.push_back(std::move(s));
  } else {
    throw Error(source + ": pre_tokenizer type \"" + type + "\" is not supported");
  }
}

void PreTokenizer::apply(std::vector<PreToken>& tokens) const {
  for (const Step& step : steps_) {
    std::vector<PreToken> next;
    next.reserve(tokens.size());
    for (PreToken& t : tokens) {
      if (t.text.empty()) continue;  // empty chunks produce no tokens
      if (step.kind == Step::Kind::kMetaspace) {
        // Rust `Metaspace::pre_tokenize`.
        replace_all(t.text, " ", step.pattern);
        bool prepend = step.prepend == Step::Prepend::kAlways || (step.prepend == Step::Prepend::kFirst && t.at_start);
        if (prepend && t.text.compare(0, step.pattern.size(), step.pattern) != 0) t.text.insert(0, step.pattern);
        if (!step.split) {
          if (!t.text.empty()) next.push_back(std::move(t));
          continue;
        }
        auto pieces = split_on(t.text, step.pattern, SplitBehavior::kMergedWithNext, false);
        for (size_t i = 0; i < pieces.size(); ++i)
          next.push_back({t.text.substr(pieces[i].first, pieces[i].second - pieces[i].first), t.at_start && i == 0});
      } else {
        auto pieces = split_on(t.text, step.pattern, step.behavior, step.invert);
        if (pieces.size() == 1 && pieces[0].first == 0 && pieces[0].second == t.text.size()) {
          next.push_back(std::move(t));  // common case: nothing to split
          continue;
        }
        for (size_t i = 0; i < pieces.size(); ++i)
          next.push_back(
              {t.text.substr(pieces[i].first, pieces[i].second - pieces[i].first), t.at_start && pieces[i].first == 0});
      }
    }
    tokens = std::move(next);
  }
}

}  // namespace dgemma::tok

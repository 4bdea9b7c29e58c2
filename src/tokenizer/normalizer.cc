#include "tokenizer/normalizer.h"

#include "dgemma/error.h"
#include "tokenizer/json_fields.h"
#include "core/utf8.h"

namespace dgemma::tok {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  size_t hit = s.find(from);
  if (hit == std::string::npos) return;
  std::string out;
  out.reserve(s.size() + (to.size() > from.size() ? (to.size() - from.size()) * 16 : 0));
  size_t run = 0;
  while (hit != std::string::npos) {
    out.append(s, run, hit - run);
    out.append(to);
    run = hit + from.size();
    hit = s.find(from, run);
  }
  out.append(s, run, std::string::npos);
  s = std::move(out);
}

Normalizer Normalizer::from_json(const json::Value& v, const std::string& source) {
  Normalizer n;
  if (!v.is_null()) n.add(v, source);
  return n;
}

void Normalizer::add(const json::Value& v, const std::string& source) {
  const std::string& type = field(v, source + ": normalizer", "type").as_string(source + ": normalizer.type");
  std::string what = source + ": normalizer \"" + type + "\"";
  if (type == "Sequence") {
    check_fields(v, what, {"type", "normalizers"});
    for (const auto& child : field(v, what, "normalizers").as_array(what + " normalizers")) add(child, source);
  } else if (type == "Replace") {
    check_fields(v, what, {"type", "pattern", "content"});
    Step s{Step::Kind::kReplace, string_pattern(field(v, what, "pattern"), what),
           field(v, what, "content").as_string(what + " content")};
    steps_.push_back(std::move(s));
  } else if (type == "Prepend") {
    check_fields(v, what, {"type", "prepend"});
    steps_.push_back(Step{Step::Kind::kPrepend, "", field(v, what, "prepend").as_string(what + " prepend")});
  } else if (type == "Strip") {
    check_fields(v, what, {"type", "strip_left", "strip_right"});
    Step s{Step::Kind::kStrip, "", ""};
    s.left = field(v, what, "strip_left").as_bool(what + " strip_left");
    s.right = field(v, what, "strip_right").as_bool(what + " strip_right");
    steps_.push_back(std::move(s));
  } else {
    throw Error(source + ": normalizer type \"" + type + "\" is not supported");
  }
}

void Normalizer::apply(std::string& s) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kReplace: replace_all(s, step.from, step.to); break;
      case Step::Kind::kPrepend:
        // Rust `Prepend::normalize`: only non-empty strings get the prefix.
        if (!s.empty()) s.insert(0, step.to);
        break;
      case Step::Kind::kStrip: {
        std::string_view t = s;
        size_t b = 0, e = t.size();
        if (step.left) {
          while (b < e) {
            size_t p = b;
            if (!is_unicode_whitespace(next_code_point(t, p))) break;
            b = p;
          }
        }
        if (step.right) {
          while (e > b) {
            size_t p = prev_code_point_start(t, e), q = p;
            if (!is_unicode_whitespace(next_code_point(t, q))) break;
            e = p;
          }
        }
        s = std::string(t.substr(b, e - b));
        break;
      }
    }
  }
}

}  // namespace dgemma::tok

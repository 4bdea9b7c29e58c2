#include "tokenizer/decoder.h"

#include "dgemma/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "core/utf8.h"

namespace dgemma::tok {

int byte_token_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  // from_str_radix accepts a leading '+' (then one digit).
  if (t[3] == '+') return digit(t[4]);
  int hi = digit(t[3]), lo = digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void flush_byte_run(const std::string& bytes, std::vector<std::string>& out) {
  if (bytes.empty()) return;
  if (find_invalid_utf8(bytes) == std::string::npos) {
    out.push_back(bytes);
  } else {
    for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
  }
}

Decoder Decoder::from_json(const json::Value& v, const std::string& source) {
  Decoder d;
  if (!v.is_null()) {
    d.present_ = true;
    d.add(v, source);
  }
  return d;
}

void Decoder::add(const json::Value& v, const std::string& source) {
  const std::string& type = field(v, source + ": decoder", "type").as_string(source + ": decoder.type");
  std::string what = source + ": decoder \"" + type + "\"";
  if (type == "Sequence") {
    check_fields(v, what, {"type", "decoders"});
    for (const auto& child : field(v, what, "decoders").as_array(what + " decoders")) add(child, source);
  } else if (type == "Replace") {
    check_fields(v, what, {"type", "pattern", "content"});
    steps_.push_back(Step{Step::Kind::kReplace, string_pattern(field(v, what, "pattern"), what),
                          field(v, what, "content").as_string(what + " content")});
  } else if (type == "ByteFallback") {
    check_fields(v, what, {"type"});
    steps_.push_back(Step{Step::Kind::kByteFallback});
  } else if (type == "Fuse") {
    check_fields(v, what, {"type"});
    steps_.push_back(Step{Step::Kind::kFuse});
  } else if (type == "Strip") {
    check_fields(v, what, {"type", "content", "start", "stop"});
    Step s{Step::Kind::kStrip, single_char(field(v, what, "content"), what + " content")};
    int64_t start = field(v, what, "start").as_int(what + " start");
    int64_t stop = field(v, what, "stop").as_int(what + " stop");
    if (start < 0 || stop < 0) throw Error(what + ": start/stop must be >= 0");
    s.start = size_t(start);
    s.stop = size_t(stop);
    steps_.push_back(std::move(s));
  } else if (type == "Metaspace") {
    check_fields(v, what, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
    Step s{Step::Kind::kMetaspace, single_char(field(v, what, "replacement"), what + " replacement")};
    if (const auto* ps = optional_field(v, "prepend_scheme")) {
      const std::string& name = ps->as_string(what + " prepend_scheme");
      if (name != "always" && name != "first" && name != "never")
        throw Error(what + ": prepend_scheme \"" + name + "\" is not supported");
      s.prepend = name != "never";
    }
    if (const auto* aps = optional_field(v, "add_prefix_space"); aps && !aps->as_bool(what + " add_prefix_space"))
      s.prepend = false;
    steps_.push_back(std::move(s));
  } else {
    throw Error(source + ": decoder type \"" + type + "\" is not supported");
  }
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (!present_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kReplace:
        for (auto& t : tokens) replace_all(t, step.from, step.to);
        break;
      case Step::Kind::kByteFallback: {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        std::string run;
        for (auto& t : tokens) {
          int b = byte_token_value(t);
          if (b >= 0) {
            run += char(b);
            continue;
          }
          flush_byte_run(run, out);
          run.clear();
          out.push_back(std::move(t));
        }
        flush_byte_run(run, out);
        tokens = std::move(out);
        break;
      }
      case Step::Kind::kFuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Step::Kind::kStrip:
        // Removes up to `start` leading and `stop` trailing `content`
        // characters from every token (decoders/strip.rs).
        for (auto& t : tokens) {
          std::vector<size_t> starts;  // code point starts
          for (size_t p = 0; p < t.size(); p += utf8_len(static_cast<unsigned char>(t[p]))) starts.push_back(p);
          starts.push_back(t.size());
          size_t n = starts.size() - 1;
          auto is_content = [&](size_t i) { return t.compare(starts[i], starts[i + 1] - starts[i], step.from) == 0; };
          size_t cut_b = 0, cut_e = n;
          while (cut_b < step.start && cut_b < n && is_content(cut_b)) ++cut_b;
          while (n - cut_e < step.stop && cut_e > cut_b && is_content(cut_e - 1)) --cut_e;
          t = t.substr(starts[cut_b], starts[cut_e] - starts[cut_b]);
        }
        break;
      case Step::Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // Every replacement char becomes a space, except in the first
          // token where they are dropped when a prefix was prepended
          // (decoders: Metaspace::decode_chain).
          replace_all(tokens[i], step.from, i == 0 && step.prepend ? "" : " ");
        }
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

}  // namespace dgemma::tok

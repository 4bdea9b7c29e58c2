#include "tokenizer/post_processor.h"

#include "dgemma/error.h"
#include "tokenizer/json_fields.h"

namespace dgemma::tok {

PostProcessor PostProcessor::from_json(const json::Value& v, const std::string& source, size_t id_bound) {
  PostProcessor p;
  if (v.is_null()) return p;
  const std::string& type = field(v, source + ": post_processor", "type").as_string(source + ": post_processor.type");
  std::string what = source + ": post_processor \"" + type + "\"";
  if (type != "TemplateProcessing") throw Error(source + ": post_processor type \"" + type + "\" is not supported");
  check_fields(v, what, {"type", "single", "pair", "special_tokens"});

  // special_tokens: {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}
  const auto& specials = field(v, what, "special_tokens").as_object(what + " special_tokens");
  auto special_ids = [&](const std::string& name) {
    for (const auto& [key, tok] : specials) {
      if (key != name) continue;
      std::vector<int32_t> ids;
      for (const auto& id : field(tok, what + " special_tokens." + key, "ids").as_array(what + " ids")) {
        int64_t x = id.as_int(what + " special_tokens." + key + ".ids");
        if (x < 0 || size_t(x) >= id_bound)
          throw Error(what + ": special token \"" + key + "\" has id " + std::to_string(x) +
                      " outside the vocabulary (" + std::to_string(id_bound) + " ids)");
        ids.push_back(int32_t(x));
      }
      return ids;
    }
    throw Error(what + ": template names special token \"" + name + "\" that is not in special_tokens");
  };

  bool seen_sequence = false;
  for (const auto& item : field(v, what, "single").as_array(what + " single")) {
    const auto& o = item.as_object(what + " single item");
    if (o.size() != 1) throw Error(what + ": bad template item " + json::dump(item));
    if (o[0].first == "SpecialToken") {
      auto ids = special_ids(field(o[0].second, what, "id").as_string(what + " SpecialToken.id"));
      auto& dst = seen_sequence ? p.suffix_ : p.prefix_;
      dst.insert(dst.end(), ids.begin(), ids.end());
    } else if (o[0].first == "Sequence") {
      const std::string& id = field(o[0].second, what, "id").as_string(what + " Sequence.id");
      if (id != "A" || seen_sequence) throw Error(what + ": the single template must contain $A exactly once");
      seen_sequence = true;
    } else {
      throw Error(what + ": template item \"" + o[0].first + "\" is not supported");
    }
  }
  if (!seen_sequence) throw Error(what + ": the single template has no $A");
  return p;
}

}  // namespace dgemma::tok

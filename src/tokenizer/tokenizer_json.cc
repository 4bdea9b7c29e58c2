// tokenizer.json -> Tokenizer::Impl. The document is walked with JsonScanner;
// small sections go through the strict DOM parser (core/json.h), the vocab
// and merges are read in place (see json_scan.h for why).
#include <algorithm>
#include <optional>

#include "core/json.h"
#include "dgemma/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/tokenizer_impl.h"
#include "core/utf8.h"

namespace dgemma::tok {
namespace {

// Ids above this are refused: they would only make the id tables huge.
constexpr int64_t kMaxId = (int64_t(1) << 24) - 1;

struct Section {
  std::string_view text;
  size_t offset = 0;  // byte offset in the file
};

// Reads the members of the object at the scanner into (key, raw value) pairs;
// duplicate keys are errors.
std::vector<std::pair<std::string, Section>> read_members(JsonScanner& sc, const std::string& what) {
  std::vector<std::pair<std::string, Section>> out;
  sc.expect('{', ("'{' to start " + what).c_str());
  if (sc.consume('}')) return out;
  std::string scratch;
  do {
    std::string key(sc.read_string(scratch));
    sc.expect(':', "':' after an object key");
    sc.skip_ws();
    size_t at = sc.pos();
    std::string_view value = sc.skip_value();
    for (const auto& m : out)
      if (m.first == key) sc.fail(what + ": duplicate key \"" + key + "\"");
    out.push_back({key, Section{value, sc.base() + at}});
  } while (sc.consume(','));
  sc.expect('}', ("',' or '}' in " + what).c_str());
  return out;
}

json::Value parse_section(const Section& s, const std::string& source, const std::string& what) {
  json::ParseOptions opt;
  opt.source = source + " (" + what + ", at byte " + std::to_string(s.offset) + ")";
  return json::parse(s.text, opt);
}

// Rough element counts for sizing hash tables (overestimates are harmless).
size_t count_char(std::string_view s, char c) { return size_t(std::count(s.begin(), s.end(), c)); }

void parse_vocab(const Section& s, const std::string& source, PieceTable& vocab) {
  JsonScanner sc(s.text, source + " model.vocab", s.offset);
  vocab.reserve(count_char(s.text, ':') + 16, s.text.size() / 2);
  sc.expect('{', "'{' to start model.vocab");
  if (sc.consume('}')) return;
  std::string scratch;
  do {
    std::string_view piece = sc.read_string(scratch);
    sc.expect(':', "':' after a vocab piece");
    int64_t id = sc.read_int();
    if (id < 0 || id > kMaxId) sc.fail("vocab id " + std::to_string(id) + " is out of range");
    if (!vocab.insert(piece, int32_t(id))) {
      if (vocab.find(piece) >= 0) sc.fail("duplicate vocab piece " + json::quoted(piece));
      sc.fail("vocab id " + std::to_string(id) + " is used twice (" + json::quoted(piece) + " and " +
              json::quoted(vocab.piece(int32_t(id))) + ")");
    }
  } while (sc.consume(','));
  sc.expect('}', "',' or '}' in model.vocab");
  if (!sc.at_end()) sc.fail("unexpected data after model.vocab");
}

void parse_merges(const Section& s, const std::string& source, BpeModel& model) {
  JsonScanner sc(s.text, source + " model.merges", s.offset);
  const PieceTable& vocab = model.vocab();
  MergeTable& merges = model.merges();
  merges.reserve(std::max(count_char(s.text, '['), count_char(s.text, '"') / 2));
  sc.expect('[', "'[' to start model.merges");
  if (sc.consume(']')) return;

  // Merges are parsed in batches so that the ~1.5 M vocabulary lookups can be
  // issued together (PieceTable::find_batch). Each merge's left and right
  // pieces are copied next to each other into `arena`, which makes the
  // joined piece a view as well.
  constexpr size_t kBatch = 256;
  std::string arena, scratch_a, scratch_b;
  std::vector<size_t> offsets(kBatch), left_len(kBatch), right_len(kBatch);
  std::vector<std::string_view> views(3 * kBatch);
  std::vector<int32_t> ids(3 * kBatch);
  uint32_t rank = 0;
  bool more = true;
  while (more) {
    arena.clear();
    size_t n = 0;
    while (more && n < kBatch) {
      std::string_view left, right;
      char c = sc.peek();
      if (c == '[') {  // ["left", "right"]
        sc.expect('[', "'['");
        left = sc.read_string(scratch_a);
        sc.expect(',', "',' between the two pieces of a merge");
        right = sc.read_string(scratch_b);
        sc.expect(']', "']' after a merge pair");
      } else if (c == '"') {  // "left right" (older files)
        std::string_view both = sc.read_string(scratch_a);
        size_t sp = both.find(' ');
        if (sp == std::string_view::npos || both.find(' ', sp + 1) != std::string_view::npos)
          sc.fail("merge " + std::to_string(rank + n) + " " + json::quoted(both) +
                  " is not two pieces separated by one space");
        left = both.substr(0, sp);
        right = both.substr(sp + 1);
      } else {
        sc.fail("expected a merge (a [left, right] pair or a \"left right\" string)");
      }
      offsets[n] = arena.size();
      left_len[n] = left.size();
      right_len[n] = right.size();
      arena.append(left);
      arena.append(right);
      ++n;
      more = sc.consume(',');
    }
    std::string_view a = arena;
    for (size_t i = 0; i < n; ++i) {
      views[3 * i] = a.substr(offsets[i], left_len[i]);
      views[3 * i + 1] = a.substr(offsets[i] + left_len[i], right_len[i]);
      views[3 * i + 2] = a.substr(offsets[i], left_len[i] + right_len[i]);
    }
    vocab.find_batch(views.data(), ids.data(), 3 * n);
    for (size_t i = 0; i < n; ++i) {
      int32_t l = ids[3 * i], r = ids[3 * i + 1], m = ids[3 * i + 2];
      if (l < 0 || r < 0 || m < 0) {
        std::string_view missing = views[3 * i + (l < 0 ? 0 : r < 0 ? 1 : 2)];
        throw Error(source + ": model.merges[" + std::to_string(rank + i) + "] (" + json::quoted(views[3 * i]) + ", " +
                    json::quoted(views[3 * i + 1]) + "): piece " + json::quoted(missing) + " is not in the vocabulary");
      }
      merges.prefetch(l, r);
    }
    for (size_t i = 0; i < n; ++i) {
      merges.insert(ids[3 * i], ids[3 * i + 1], rank + uint32_t(i), ids[3 * i + 2]);
      model.note_merge_result(views[3 * i + 2]);
    }
    rank += uint32_t(n);
  }
  sc.expect(']', "',' or ']' in model.merges");
  if (!sc.at_end()) sc.fail("unexpected data after model.merges");
}

void parse_model(const Section& model_section, const std::string& source, BpeModel& model) {
  JsonScanner sc(model_section.text, source, model_section.offset);
  auto members = read_members(sc, "model");
  std::optional<Section> vocab, merges;
  BpeOptions opt;
  std::string type;
  for (const auto& [key, sec] : members) {
    std::string what = source + ": model." + key;
    if (key == "vocab") {
      vocab = sec;
      continue;
    }
    if (key == "merges") {
      merges = sec;
      continue;
    }
    json::Value v = parse_section(sec, source, "model." + key);
    if (key == "type") {
      type = v.as_string(what);
    } else if (key == "dropout") {
      if (!v.is_null() && v.as_double(what) != 0.0)
        throw Error(what + ": BPE dropout " + json::dump(v) + " is not supported (it makes encoding random)");
    } else if (key == "unk_token") {
      if (!v.is_null()) {
        opt.unk_token = v.as_string(what);
        opt.has_unk = true;
      }
    } else if (key == "continuing_subword_prefix") {
      if (!v.is_null()) opt.continuing_subword_prefix = v.as_string(what);
    } else if (key == "end_of_word_suffix") {
      if (!v.is_null()) opt.end_of_word_suffix = v.as_string(what);
    } else if (key == "fuse_unk") {
      opt.fuse_unk = !v.is_null() && v.as_bool(what);
    } else if (key == "byte_fallback") {
      opt.byte_fallback = !v.is_null() && v.as_bool(what);
    } else if (key == "ignore_merges") {
      opt.ignore_merges = !v.is_null() && v.as_bool(what);
    } else {
      throw Error(source + ": model field \"" + key + "\" is not supported");
    }
  }
  if (type.empty()) throw Error(source + ": model.type is missing");
  if (type != "BPE") throw Error(source + ": model type \"" + type + "\" is not supported (only BPE)");
  if (!vocab) throw Error(source + ": model.vocab is missing");
  parse_vocab(*vocab, source, model.vocab());
  if (merges) parse_merges(*merges, source, model);
  model.finalize(std::move(opt), source);
}

std::vector<AddedToken> parse_added_tokens(const json::Value& v, const std::string& source) {
  std::vector<AddedToken> out;
  if (v.is_null()) return out;
  const auto& arr = v.as_array(source + ": added_tokens");
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string what = source + ": added_tokens[" + std::to_string(i) + "]";
    const json::Value& o = arr[i];
    check_fields(o, what, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    AddedToken t;
    t.content = field(o, what, "content").as_string(what + ".content");
    int64_t id = field(o, what, "id").as_int(what + ".id");
    if (id < 0 || id > kMaxId) throw Error(what + ": id " + std::to_string(id) + " is out of range");
    t.id = int32_t(id);
    auto flag = [&](const char* name, bool dflt) {
      const json::Value* f = optional_field(o, name);
      return f ? f->as_bool(what + "." + name) : dflt;
    };
    t.special = flag("special", false);
    t.single_word = flag("single_word", false);
    t.lstrip = flag("lstrip", false);
    t.rstrip = flag("rstrip", false);
    t.normalized = flag("normalized", !t.special);
    if (t.content.empty()) throw Error(what + ": empty content");
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

std::shared_ptr<Tokenizer::Impl> parse_tokenizer_json(std::string_view text, const std::string& source) {
  auto impl = std::make_shared<Tokenizer::Impl>();
  Tokenizer::Impl& t = *impl;
  t.source = source;

  JsonScanner sc(text, source);
  auto members = read_members(sc, "the top-level object");
  if (!sc.at_end()) sc.fail("unexpected data after the top-level object");

  std::optional<Section> model;
  json::Value added, normalizer, pre_tokenizer, post_processor, decoder;
  for (const auto& [key, sec] : members) {
    if (key == "model") {
      model = sec;
      continue;
    }
    json::Value v = parse_section(sec, source, key);
    if (key == "version") {
      v.as_string(source + ": version");
    } else if (key == "truncation" || key == "padding") {
      // Padding to the longest sequence of a batch leaves one sequence as it
      // is; anything else (truncation, fixed-length padding) would change
      // what encode() returns.
      const json::Value* strategy = v.is_object() ? v.find("strategy") : nullptr;
      bool harmless = v.is_null() || (key == "padding" && strategy && strategy->is_string() &&
                                      strategy->as_string() == "BatchLongest");
      if (!harmless) throw Error(source + ": " + key + " is not supported (expected null, got " + json::dump(v) + ")");
    } else if (key == "added_tokens") {
      added = std::move(v);
    } else if (key == "normalizer") {
      normalizer = std::move(v);
    } else if (key == "pre_tokenizer") {
      pre_tokenizer = std::move(v);
    } else if (key == "post_processor") {
      post_processor = std::move(v);
    } else if (key == "decoder") {
      decoder = std::move(v);
    } else {
      throw Error(source + ": top-level field \"" + key + "\" is not supported");
    }
  }
  if (!model) throw Error(source + ": no \"model\" section");

  // Components first: they are cheap and their errors are the likely ones.
  t.normalizer = Normalizer::from_json(normalizer, source);
  t.pre_tokenizer = PreTokenizer::from_json(pre_tokenizer, source);
  t.decoder = Decoder::from_json(decoder, source);
  t.added = parse_added_tokens(added, source);
  parse_model(*model, source, t.model);

  // Added-token ids: the Rust crate ignores the "id" field and uses the
  // vocabulary id of the content, or the next id past the vocabulary
  // (AddedVocabulary::add_tokens). transformers.js uses the field. When the
  // two disagree the file is ambiguous, so refuse it.
  const PieceTable& vocab = t.model.vocab();
  int64_t max_added = -1;
  for (const AddedToken& a : t.added) {
    int32_t in_vocab = vocab.find(a.content);
    int64_t expected;
    if (in_vocab >= 0) {
      expected = in_vocab;
    } else {
      int64_t vsize = int64_t(vocab.size());
      expected = max_added < 0 ? vsize : (max_added >= vsize || vsize == 0 ? max_added + 1 : vsize);
    }
    if (a.id != expected)
      throw Error(source + ": added token " + json::quoted(a.content) + " has id " + std::to_string(a.id) +
                  ", but the reference implementation would give it id " + std::to_string(expected) +
                  (in_vocab >= 0 ? " (its id in model.vocab)" : " (the next id after the vocabulary)"));
    max_added = std::max<int64_t>(max_added, a.id);
  }
  finish_impl(t, post_processor);
  return impl;
}

void finish_impl(Tokenizer::Impl& t, const json::Value& post_processor) {
  const std::string& source = t.source;
  const PieceTable& vocab = t.model.vocab();
  for (const AddedToken& a : t.added)
    if (!t.added_index.insert(a.content, a.id))
      throw Error(source + ": added token " + json::quoted(a.content) + " (id " + std::to_string(a.id) +
                  ") is listed twice");

  // id -> piece/flags.
  size_t bound = vocab.id_bound();
  for (const AddedToken& a : t.added) bound = std::max(bound, size_t(a.id) + 1);
  t.pieces.assign(bound, std::string_view());
  t.flags.assign(bound, 0);
  for (size_t id = 0; id < vocab.id_bound(); ++id) {
    if (!vocab.has_id(int32_t(id))) continue;
    t.pieces[id] = vocab.piece(int32_t(id));
    t.flags[id] = Tokenizer::Impl::kPresent;
  }
  // The normalized matcher also comes without the special tokens (for text
  // whose special-token strings are plain text, Tokenizer::encode_plain); the
  // raw matcher skips them by position instead (AddedTokenMatcher::split).
  struct Patterns {
    std::vector<const AddedToken*> tokens;
    std::vector<std::string> strings;
    void add(const AddedToken* a, std::string s) {
      tokens.push_back(a);
      strings.push_back(std::move(s));
    }
  } raw, normalized, normalized_plain;
  for (const AddedToken& a : t.added) {
    t.pieces[size_t(a.id)] = a.content;
    t.flags[size_t(a.id)] =
        Tokenizer::Impl::kPresent | Tokenizer::Impl::kAdded | (a.special ? Tokenizer::Impl::kSpecial : 0);
    std::string p = a.content;
    if (a.normalized) t.normalizer.apply(p);
    Patterns& all = a.normalized ? normalized : raw;
    if (!a.special && a.normalized) normalized_plain.add(&a, p);
    all.add(&a, std::move(p));
  }
  t.raw_matcher.build(raw.tokens, raw.strings);
  t.normalized_matcher.build(normalized.tokens, normalized.strings);
  t.normalized_plain_matcher.build(normalized_plain.tokens, normalized_plain.strings);
  t.post_processor = PostProcessor::from_json(post_processor, source, bound);
}

}  // namespace dgemma::tok

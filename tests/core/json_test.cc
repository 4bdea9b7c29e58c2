// The strict JSON reader/writer (src/core/json.h): escapes, surrogates,
// UTF-8 validation, duplicate keys, depth limit, numbers and dump round trips.
#include "core/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "dgemma/error.h"

namespace dgemma::json {
namespace {

// Expects parse(text) to throw an Error containing `needle`.
void expect_parse_error(std::string_view text, const std::string& needle, const ParseOptions& opt = {}) {
  try {
    parse(text, opt);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "input: " << text << "\nmessage: " << e.what() << "\nmissing: " << needle;
    return;
  }
  ADD_FAILURE() << "accepted invalid JSON: " << text;
}

std::string parse_string(std::string_view json_text) { return parse(json_text).as_string(); }

// ---- structure ------------------------------------------------------------------

TEST(JsonParse, LiteralsArraysObjects) {
  Value v = parse(" \t\r\n{\"a\": [true, false, null, 1, \"x\", {}, []], \"b\": {\"c\": -2}} \n");
  ASSERT_TRUE(v.is_object());
  const Array& a = v.find("a")->as_array();
  ASSERT_EQ(a.size(), 7u);
  EXPECT_TRUE(a[0].as_bool());
  EXPECT_FALSE(a[1].as_bool());
  EXPECT_TRUE(a[2].is_null());
  EXPECT_EQ(a[3].as_int(), 1);
  EXPECT_EQ(a[4].as_string(), "x");
  EXPECT_TRUE(a[5].is_object());
  EXPECT_TRUE(a[6].is_array());
  EXPECT_EQ(v.find("b")->find("c")->as_int(), -2);
  EXPECT_EQ(v.find("zz"), nullptr);
  EXPECT_EQ(a[0].find("a"), nullptr);  // not an object
}

TEST(JsonParse, ObjectsKeepInsertionOrder) {
  Value v = parse(R"({"z": 1, "a": 2, "m": 3})");
  const Object& o = v.as_object();
  ASSERT_EQ(o.size(), 3u);
  EXPECT_EQ(o[0].first, "z");
  EXPECT_EQ(o[1].first, "a");
  EXPECT_EQ(o[2].first, "m");
}

TEST(JsonParse, RejectsMalformedStructure) {
  expect_parse_error("", "unexpected end of input");
  expect_parse_error("   ", "unexpected end of input");
  expect_parse_error("{} x", "unexpected data after the JSON value");
  expect_parse_error("[1,]", "unexpected character ']'");
  expect_parse_error(R"({"a":1,})", "expected a string key");
  expect_parse_error(R"({"a" 1})", "expected ':' after object key");
  expect_parse_error(R"({"a":1 "b":2})", "expected ',' or '}' in object");
  expect_parse_error("[1 2]", "expected ',' or ']' in array");
  expect_parse_error("[1", "unexpected end of input in array");
  expect_parse_error(R"({"a":1)", "unexpected end of input in object");
  expect_parse_error("{'a':1}", "expected a string key");
  expect_parse_error("tru", "invalid literal");
  expect_parse_error("nul", "invalid literal");
  expect_parse_error("True", "unexpected character 'T'");
  expect_parse_error("\x01", "unexpected character '\\x01'");
}

TEST(JsonParse, ErrorNamesSourceLineAndColumn) {
  ParseOptions opt;
  opt.source = "cfg.json";
  expect_parse_error("{\n  \"a\": x}", "cfg.json: invalid JSON at line 2, column 8: unexpected character 'x'", opt);
}

// ---- strings ---------------------------------------------------------------------

TEST(JsonString, SimpleEscapes) {
  EXPECT_EQ(parse_string(R"("\"\\\/\b\f\n\r\t")"), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(parse_string(R"("plain text")"), "plain text");
  EXPECT_EQ(parse_string(R"("")"), "");
}

TEST(JsonString, UnicodeEscapes) {
  EXPECT_EQ(parse_string(R"("\u0041")"), "A");
  EXPECT_EQ(parse_string(R"("\u00e9\u00E9")"), "\xc3\xa9\xc3\xa9");
  EXPECT_EQ(parse_string(R"("\u20ac")"), "\xe2\x82\xac");
  EXPECT_EQ(parse_string(R"("\u0000")"), std::string("\0", 1));
  EXPECT_EQ(parse_string(R"("\uffff")"), "\xef\xbf\xbf");
}

TEST(JsonString, SurrogatePairs) {
  EXPECT_EQ(parse_string(R"("\ud83d\ude00")"), "\xf0\x9f\x98\x80");  // U+1F600
  EXPECT_EQ(parse_string(R"("\uD800\uDC00")"), "\xf0\x90\x80\x80");  // U+10000
  EXPECT_EQ(parse_string(R"("\udbff\udfff")"), "\xf4\x8f\xbf\xbf");  // U+10FFFF
  expect_parse_error(R"("\ud83d")", "lone high surrogate");
  expect_parse_error(R"("\ud83dx")", "lone high surrogate");
  expect_parse_error(R"("\ud83d\u0041")", "invalid low surrogate");
  expect_parse_error(R"("\ud83d\ud83d")", "invalid low surrogate");
  expect_parse_error(R"("\ude00")", "lone low surrogate");
}

TEST(JsonString, RejectsBadEscapes) {
  expect_parse_error(R"("\x41")", "invalid escape character");
  expect_parse_error(R"("\u00zz")", "invalid hex digit");
  expect_parse_error(R"("\u12")", "truncated \\u escape");
  expect_parse_error("\"abc\\", "unterminated escape");
  expect_parse_error("\"abc", "unterminated string");
  expect_parse_error("\"a\nb\"", "control character inside string");
  expect_parse_error("\"a\tb\"", "control character inside string");
}

TEST(JsonString, AcceptsValidRawUtf8) {
  const std::string s = "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf";
  EXPECT_EQ(parse_string(std::string("\"").append(s).append("\"")), s);
}

TEST(JsonString, RejectsInvalidUtf8) {
  for (const char* bad : {
           "\xff",              // never valid
           "\x80",              // stray continuation
           "\xc0\xaf",          // overlong '/'
           "\xe0\x80\xaf",      // overlong, 3 bytes
           "\xf0\x80\x80\xaf",  // overlong, 4 bytes
           "\xed\xa0\x80",      // encoded surrogate U+D800
           "\xf4\x90\x80\x80",  // above U+10FFFF
           "\xe2\x82",          // truncated sequence
           "\xc3\x41",          // bad continuation
       }) {
    std::string text = "\"";  // built with += to dodge GCC 12's false -Wrestrict
    text += bad;
    text += '"';
    expect_parse_error(text, "invalid UTF-8 in string");
    EXPECT_FALSE(is_valid_utf8(bad)) << bad;
  }
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("ascii \xc3\xa9 \xf0\x9f\x98\x80"));
}

// ---- duplicates and depth -----------------------------------------------------------

TEST(JsonObject, RejectsDuplicateKeys) {
  ParseOptions opt;
  opt.source = "h.json";
  expect_parse_error(R"({"a": 1, "b": 2, "a": 3})", "h.json: invalid JSON at line 1, column 1: duplicate key \"a\"",
                     opt);
  expect_parse_error(R"({"x": {"k": 1, "k": 1}})", "duplicate key \"k\"");
  // Escaped and raw spellings of the same key are the same key.
  expect_parse_error(R"({"\u0061": 1, "a": 2})", "duplicate key \"a\"");
}

TEST(JsonObject, DuplicatesAllowedWhenAsked) {
  ParseOptions opt;
  opt.reject_duplicate_keys = false;
  Value v = parse(R"({"a": 1, "a": 2})", opt);
  EXPECT_EQ(v.as_object().size(), 2u);
  EXPECT_EQ(v.find("a")->as_int(), 1);  // first wins for find()
}

TEST(JsonDepth, LimitIsEnforced) {
  auto nested = [](int n) { return std::string(size_t(n), '[') + std::string(size_t(n), ']'); };
  EXPECT_NO_THROW(parse(nested(200)));
  EXPECT_NO_THROW(parse(nested(257)));  // depths 0..256
  expect_parse_error(nested(258), "nesting deeper than 256");
  expect_parse_error(nested(100000), "nesting deeper than 256");  // no stack overflow
  ParseOptions opt;
  opt.max_depth = 2;
  EXPECT_NO_THROW(parse(R"({"a": {"b": 1}})", opt));
  expect_parse_error(R"({"a": {"b": [1]}})", "nesting deeper than 2", opt);
}

// ---- numbers ----------------------------------------------------------------------

TEST(JsonNumber, Integers) {
  EXPECT_EQ(parse("0").as_int(), 0);
  EXPECT_EQ(parse("-0").as_int(), 0);
  EXPECT_EQ(parse("42").as_int(), 42);
  EXPECT_EQ(parse("-17").as_int(), -17);
  EXPECT_TRUE(parse("9223372036854775807").is_integer());
  EXPECT_EQ(parse("9223372036854775807").as_int(), INT64_MAX);
  EXPECT_EQ(parse("-9223372036854775808").as_int(), INT64_MIN);
}

TEST(JsonNumber, BigIntegersBecomeDoubles) {
  Value v = parse("9223372036854775808");
  EXPECT_TRUE(v.is_number());
  EXPECT_FALSE(v.is_integer());
  EXPECT_DOUBLE_EQ(v.as_double(), 9223372036854775808.0);
  EXPECT_THROW(v.as_int(), Error);  // not representable
  Value big = parse("123456789012345678901234567890");
  EXPECT_FALSE(big.is_integer());
  EXPECT_DOUBLE_EQ(big.as_double(), 1.2345678901234568e29);
  EXPECT_FALSE(parse("-9223372036854775809").is_integer());
}

TEST(JsonNumber, Fractions) {
  EXPECT_DOUBLE_EQ(parse("1.5").as_double(), 1.5);
  EXPECT_DOUBLE_EQ(parse("-0.25").as_double(), -0.25);
  EXPECT_DOUBLE_EQ(parse("1e3").as_double(), 1000.0);
  EXPECT_DOUBLE_EQ(parse("1E+2").as_double(), 100.0);
  EXPECT_DOUBLE_EQ(parse("2.5e-3").as_double(), 0.0025);
  EXPECT_FALSE(parse("1e3").is_integer());
  EXPECT_FALSE(parse("2.0").is_integer());
  EXPECT_TRUE(std::isinf(parse("1e400").as_double()));
  EXPECT_TRUE(std::isinf(parse("-1e400").as_double()));
}

// KNOWN BUG in src/core/json.cc parse_number(): std::from_chars reports
// underflow with the same errc::result_out_of_range as overflow, and the
// parser maps both to +/-HUGE_VAL, so 1e-400 reads as +inf instead of 0.
// Enable once json.cc tells the two apart.
TEST(JsonNumber, UnderflowReadsAsZero) {
  EXPECT_EQ(parse("1e-400").as_double(), 0.0);
  EXPECT_EQ(parse("-1e-400").as_double(), 0.0);
  EXPECT_EQ(parse("0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
                  "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000001")
                .as_double(),
            0.0);
}

TEST(JsonNumber, AsIntAcceptsIntegralDoublesOnly) {
  EXPECT_EQ(parse("2.0").as_int(), 2);
  EXPECT_EQ(parse("1e3").as_int(), 1000);
  try {
    parse("2.5").as_int("cfg.x");
    ADD_FAILURE() << "2.5 accepted as an integer";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cfg.x: expected an integer, got 2.5");
  }
}

TEST(JsonNumber, RejectsNonJsonSpellings) {
  expect_parse_error("01", "unexpected data after the JSON value");
  expect_parse_error("1.", "digit expected after decimal point");
  expect_parse_error("1.e5", "digit expected after decimal point");
  expect_parse_error(".5", "unexpected character '.'");
  expect_parse_error("-", "truncated number");
  expect_parse_error("-a", "invalid number");
  expect_parse_error("+1", "unexpected character '+'");
  expect_parse_error("1e", "digit expected in exponent");
  expect_parse_error("1e+", "digit expected in exponent");
  expect_parse_error("0x10", "unexpected data after the JSON value");
  expect_parse_error("NaN", "unexpected character 'N'");
  expect_parse_error("Infinity", "unexpected character 'I'");
}

// ---- accessors --------------------------------------------------------------------

TEST(JsonValue, KindMismatchMessages) {
  Value v = parse(R"({"n": 3})");
  try {
    v.find("n")->as_string("config.json: text_config.name");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: text_config.name: expected a string, got number");
  }
  EXPECT_THROW(v.as_array(), Error);
  EXPECT_THROW(v.as_bool(), Error);
  EXPECT_THROW(v.as_double(), Error);
  EXPECT_STREQ(kind_name(Value::Kind::kObject), "object");
  EXPECT_STREQ(kind_name(Value::Kind::kNull), "null");
}

TEST(JsonValue, SetInsertsOrReplaces) {
  Value v;
  v.set("a", 1);
  v.set("b", "x");
  v.set("a", 2.5);
  EXPECT_EQ(dump(v), R"({"a": 2.5, "b": "x"})");
}

// ---- dump ---------------------------------------------------------------------------

TEST(JsonDump, CompactAndPretty) {
  Value v = parse(R"({"a":[1,2.5,"s",null,true],"b":{}, "c": []})");
  EXPECT_EQ(dump(v), R"({"a": [1, 2.5, "s", null, true], "b": {}, "c": []})");
  EXPECT_EQ(dump(v, 2),
            "{\n  \"a\": [\n    1,\n    2.5,\n    \"s\",\n    null,\n    true\n  ],\n  \"b\": {},\n  \"c\": []\n}");
}

TEST(JsonDump, NumbersUseShortestRoundTripForm) {
  EXPECT_EQ(dump(Value(0.1)), "0.1");
  EXPECT_EQ(dump(Value(2.0)), "2.0");  // stays a double on re-read
  EXPECT_EQ(dump(Value(1e300)), "1e+300");
  EXPECT_EQ(dump(Value(-1.5e-7)), "-1.5e-07");
  EXPECT_EQ(dump(Value(int64_t(-5))), "-5");
  EXPECT_EQ(dump(Value(uint64_t(18446744073709551615ull))), "18446744073709551616.0");
  EXPECT_EQ(dump(Value(std::nan(""))), "null");
  EXPECT_EQ(dump(Value(HUGE_VAL)), "null");
  for (double d : {0.1, 1.0 / 3.0, 6.02214076e23, 5e-324, 1.7976931348623157e308}) {
    EXPECT_EQ(parse(dump(Value(d))).as_double(), d) << d;
  }
}

TEST(JsonDump, StringEscapes) {
  EXPECT_EQ(json::quoted("a\"b\\c\n\r\t\b\f"), R"("a\"b\\c\n\r\t\b\f")");
  EXPECT_EQ(json::quoted(std::string("\x01\x1f\0", 3)), R"("\u0001\u001f\u0000")");
  EXPECT_EQ(json::quoted("/ \xc3\xa9 \xf0\x9f\x98\x80"), "\"/ \xc3\xa9 \xf0\x9f\x98\x80\"");
  // Invalid bytes become U+FFFD so that the output is always valid JSON.
  EXPECT_EQ(json::quoted("a\xff"
                         "b"),
            "\"a\xef\xbf\xbd"
            "b\"");
  EXPECT_EQ(json::quoted("\xed\xa0\x80"), "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
  EXPECT_TRUE(is_valid_utf8(json::quoted("\xc3")));
}

TEST(JsonDump, RoundTrip) {
  const std::string text =
      R"({"name": "t\u00e9st \ud83d\ude00", "esc": "q\"\\\n\u0001", "n": [0, -1, 9223372036854775807,)"
      R"( -9223372036854775808, 1.5, -2.5e-10, 1e+100], "nested": {"a": {"b": [[], {}, null]}},)"
      R"( "flags": [true, false]})";
  Value v = parse(text);
  const std::string once = dump(v);
  EXPECT_EQ(dump(parse(once)), once);
  const std::string pretty = dump(v, 4);
  EXPECT_EQ(dump(parse(pretty)), once);
  EXPECT_EQ(parse(once).find("name")->as_string(), "t\xc3\xa9st \xf0\x9f\x98\x80");
  EXPECT_EQ(parse(once).find("n")->as_array()[2].as_int(), INT64_MAX);
}

}  // namespace
}  // namespace dgemma::json

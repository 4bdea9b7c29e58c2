// Reading tool calls out of generated Gemma 4 text (docs/server.md "Tool
// calling"). The well-formed outputs have the shape of the model outputs in
// vLLM's gemma4 tool-parser tests; the malformed ones must come back as
// "not a call" (nullopt), never as an exception or a crash.
#include <gtest/gtest.h>

#include <string>

#include "core/json.h"
#include "tokenizer/tool_call_parser.h"

namespace dgemma {
namespace {

TEST(ToolCallParser, OneCall) {
  const auto r = parse_tool_calls("<|tool_call>call:get_weather{location:<|\"|>London<|\"|>}<tool_call|>");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->calls.size(), 1u);
  EXPECT_EQ(r->calls[0].name, "get_weather");
  EXPECT_EQ(json::dump(r->calls[0].arguments), R"({"location": "London"})");
  EXPECT_EQ(r->content, "");
}

TEST(ToolCallParser, TwoCallsAndTextAround) {
  const auto r = parse_tool_calls(
      "Let me check. <|tool_call>call:get_weather{location:<|\"|>Paris, France<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|>"
      "<|tool_call>call:get_time{}<tool_call|>\n");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->calls.size(), 2u);
  EXPECT_EQ(r->calls[0].name, "get_weather");
  EXPECT_EQ(json::dump(r->calls[0].arguments), R"({"location": "Paris, France", "unit": "c"})");
  EXPECT_EQ(r->calls[1].name, "get_time");
  EXPECT_EQ(json::dump(r->calls[1].arguments), "{}");
  EXPECT_EQ(r->content, "Let me check.");
}

// Text that is not valid UTF-8 (a fuzzer's input; the server settles UTF-8
// first) holds no call: it comes back as not-a-call, shown as it is.
TEST(ToolCallParser, InvalidUtf8IsNotACall) {
  EXPECT_FALSE(parse_tool_calls(" \xff\xe4 <|tool_call>call:f{a:1}<tool_call|>"));
  EXPECT_FALSE(parse_tool_calls("<|tool_call>call:f{a:\xf0}<tool_call|>"));
  EXPECT_TRUE(parse_tool_calls("<|tool_call>call:f{a:\xc3\xa9}<tool_call|>"));  // é is fine
}

TEST(ToolCallParser, NestedValuesOfEveryKind) {
  const auto r = parse_tool_calls(
      "<|tool_call>call:plan{stops:[{name:<|\"|>a<|\"|>,at:1},{name:<|\"|>b<|\"|>,at:2.5}],"
      "opts:{fast:true,slow:false,none:None,nil:null,<|\"|>3<|\"|>:<|\"|>three<|\"|>},n:-1.5e3,"
      "json:\"quoted, with \\\"escapes\\\"\",word:celsius,empty:[],e:{}}<tool_call|>");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->calls.size(), 1u);
  const json::Value& a = r->calls[0].arguments;
  EXPECT_EQ(json::dump(*a.find("stops")), R"([{"name": "a", "at": 1}, {"name": "b", "at": 2.5}])");
  EXPECT_EQ(json::dump(*a.find("opts")), R"({"fast": true, "slow": false, "none": null, "nil": null, "3": "three"})");
  EXPECT_EQ(a.find("n")->as_double(), -1500.0);
  EXPECT_EQ(a.find("json")->as_string(), "quoted, with \"escapes\"");
  EXPECT_EQ(a.find("word")->as_string(), "celsius");
  EXPECT_EQ(json::dump(*a.find("empty")), "[]");
  EXPECT_EQ(json::dump(*a.find("e")), "{}");
}

TEST(ToolCallParser, StringsAreTakenAsTheyAre) {
  // Quotes, backslashes, braces, commas, newlines and non-ASCII text inside
  // <|"|> need no escaping; the JSON arguments escape what JSON must.
  const std::string value = "He said \"hi\" {not, an: object} \\ naïve 東京 🙂\nnext";
  const auto r = parse_tool_calls("<|tool_call>call:say{text:<|\"|>" + value + "<|\"|>}<tool_call|>");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->calls.size(), 1u);
  EXPECT_EQ(r->calls[0].arguments.find("text")->as_string(), value);
  const std::string dumped = json::dump(r->calls[0].arguments);
  EXPECT_EQ(json::dump(json::parse(dumped)), dumped);
  EXPECT_NE(dumped.find("\\\"hi\\\""), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("\\n"), std::string::npos) << dumped;
}

TEST(ToolCallParser, PlainTextIsContent) {
  const auto r = parse_tool_calls("  The answer is 42; braces {a:1} and <|\"|> are just text. ");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->calls.empty());
  EXPECT_EQ(r->content, "The answer is 42; braces {a:1} and <|\"|> are just text.");
}

TEST(ToolCallParser, MalformedCallsAreNotCalls) {
  for (const char* text : {
           "<|tool_call>call:get_weather{location:<|\"|>London",               // cut off
           "<|tool_call>call:get_weather{location:<|\"|>London<|\"|>}",        // no end marker
           "<|tool_call>call:get_weather{location:<|\"|>London}<tool_call|>",  // unterminated string
           "<|tool_call>get_weather{location:<|\"|>x<|\"|>}<tool_call|>",      // no "call:"
           "<|tool_call>call:{a:1}<tool_call|>",                               // no name
           "<|tool_call>call:get weather{a:1}<tool_call|>",                    // a space in the name
           "<|tool_call>call:f{a:{b:1}<tool_call|>",                           // unbalanced braces
           "<|tool_call>call:f{a:[1,2}<tool_call|>",                           // unbalanced brackets
           "<|tool_call>call:f{a:1 b:2}<tool_call|>",                          // no comma
           "<|tool_call>call:f{a:}<tool_call|>",                               // no value
           "<|tool_call>call:f{:1}<tool_call|>",                               // no key
           "<|tool_call>call:f{a:1}} trailing<tool_call|>",                    // junk before the end
           "<|tool_call>call:f{a:1}<tool_call|> then <|tool_call>call:g{",     // a good call, then a broken one
           "<|tool_call>",                                                     // only the marker
       }) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(parse_tool_calls(text).has_value());
  }
}

TEST(ToolCallParser, DeepNestingIsRefusedWithoutRecursingFar) {
  std::string deep = "<|tool_call>call:f{a:";
  for (int i = 0; i < 10000; ++i) deep += "[";
  deep += "1";
  for (int i = 0; i < 10000; ++i) deep += "]";
  deep += "}<tool_call|>";
  EXPECT_FALSE(parse_tool_calls(deep).has_value());
  // Nesting within the limit reads.
  const auto r = parse_tool_calls("<|tool_call>call:f{a:[[[{b:[1]}]]]}<tool_call|>");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::dump(r->calls[0].arguments), R"({"a": [[[{"b": [1]}]]]})");
}

}  // namespace
}  // namespace dgemma

// The Gemma 4 tool format in chat prompts (docs/server.md §7):
// declarations in the system turn, earlier calls and their results inside
// the model turn. The expected texts follow the reference chat template of
// google/gemma-4-* (chat_template.jinja: its format_function_declaration,
// format_parameters and format_argument macros, and the forward scan that
// writes the "tool" messages after the calls they answer, leaving the model
// turn open); their call and response shape is the one vLLM's gemma4
// tool-parser tests feed back (`<|tool_call>call:get_weather{location:
// <|"|>London<|"|>}<tool_call|>`).
#include <gtest/gtest.h>

#include <algorithm>

#include "dgemma/error.h"
#include "generate/default_model_fixture.h"
#include "tokenizer/chat_template.h"
#include "tokenizer_test_util.h"

namespace dgemma {
namespace {

const json::Value weather_tool() {
  return json::parse(R"({"name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "required": ["location"], "properties": {
      "unit": {"type": "string", "enum": ["c", "f"]},
      "location": {"type": "string", "description": "City"}}}})");
}

const std::string kDeclaration =
    "<|tool>declaration:get_weather{description:<|\"|>Current weather<|\"|>,parameters:{properties:{"
    "location:{description:<|\"|>City<|\"|>,type:<|\"|>STRING<|\"|>},"
    "unit:{enum:[<|\"|>c<|\"|>,<|\"|>f<|\"|>],type:<|\"|>STRING<|\"|>}},"
    "required:[<|\"|>location<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|>";

ChatToolCall call(std::string id, std::string name, const char* arguments) {
  return {std::move(id), std::move(name), json::parse(arguments)};
}

ChatMessage tool_result(std::string id, std::string text) {
  ChatMessage m("tool", std::move(text));
  m.tool_call_id = std::move(id);
  return m;
}

TEST(ChatTools, DeclarationsGoInTheSystemTurn) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  const std::vector<json::Value> tools = {weather_tool()};
  const std::vector<ChatMessage> with_system = {{"system", "Be brief."}, {"user", "Weather in Paris?"}};
  EXPECT_EQ(render_chat(tok, with_system, true, false, ChatTemplateKind::kAuto, tools),
            "<bos><|turn>system\nBe brief." + kDeclaration +
                "<turn|>\n<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  // Tools alone open a system turn too; thinking comes first in it.
  const std::vector<ChatMessage> user_only = {{"user", "Hi"}};
  EXPECT_EQ(render_chat(tok, user_only, true, true, ChatTemplateKind::kAuto, tools),
            "<bos><|turn>system\n<|think|>\n" + kDeclaration + "<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
  // A function without description or parameters.
  const std::vector<json::Value> bare = {json::parse(R"({"name": "now"})")};
  EXPECT_EQ(render_chat(tok, user_only, false, false, ChatTemplateKind::kAuto, bare),
            "<bos><|turn>system\n<|tool>declaration:now{description:<|\"|><|\"|>}<tool|><turn|>\n"
            "<|turn>user\nHi<turn|>\n");
}

TEST(ChatTools, NestedSchemasAreRenderedAsTheReferenceDoes) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  // An array of objects, a nested object, a nullable number; keys sorted
  // ignoring case (jinja's dictsort).
  const std::vector<json::Value> tools = {json::parse(R"({"name": "plan", "description": "d",
    "parameters": {"type": "object", "properties": {
      "Stops": {"type": "array", "items": {"type": "object", "required": ["name"],
                 "properties": {"name": {"type": "string"}}}},
      "budget": {"type": "number", "nullable": true},
      "opts": {"type": "object", "properties": {"fast": {"type": "boolean"}}, "required": ["fast"]}}}})")};
  const std::vector<ChatMessage> m = {{"user", "Go"}};
  EXPECT_EQ(render_chat(tok, m, false, false, ChatTemplateKind::kAuto, tools),
            "<bos><|turn>system\n<|tool>declaration:plan{description:<|\"|>d<|\"|>,parameters:{properties:{"
            "budget:{nullable:true,type:<|\"|>NUMBER<|\"|>},"
            "opts:{properties:{fast:{type:<|\"|>BOOLEAN<|\"|>}},required:[<|\"|>fast<|\"|>],type:<|\"|>OBJECT<|\"|>},"
            "Stops:{items:{properties:{name:{type:<|\"|>STRING<|\"|>}},required:[<|\"|>name<|\"|>],"
            "type:<|\"|>OBJECT<|\"|>},type:<|\"|>ARRAY<|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n"
            "<|turn>user\nGo<turn|>\n");
}

TEST(ChatTools, CallsAndResultsStayInTheModelTurn) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  const std::vector<json::Value> tools = {weather_tool()};
  ChatMessage calls("assistant", "");
  calls.tool_calls = {call("a", "get_weather", R"({"unit": "c", "location": "Paris"})"),
                      call("b", "get_weather", R"({"location": "Rome"})")};
  std::vector<ChatMessage> m = {
      {"user", "Weather in Paris and Rome?"}, calls, tool_result("b", "12C"), tool_result("a", "18C, sunny")};
  const std::string head = "<bos><|turn>system\n" + kDeclaration +
                           "<turn|>\n<|turn>user\nWeather in Paris and Rome?<turn|>\n<|turn>model\n"
                           "<|tool_call>call:get_weather{location:<|\"|>Paris<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|>"
                           "<|tool_call>call:get_weather{location:<|\"|>Rome<|\"|>}<tool_call|>"
                           "<|tool_response>response:get_weather{value:<|\"|>12C<|\"|>}<tool_response|>"
                           "<|tool_response>response:get_weather{value:<|\"|>18C, sunny<|\"|>}<tool_response|>";
  // Results and no content: the turn stays open and no generation prompt
  // follows; the model goes on after the results.
  EXPECT_EQ(render_chat(tok, m, true, false, ChatTemplateKind::kAuto, tools), head);
  // The answer after the results continues that turn; the next user turn
  // gets the generation prompt again.
  m.push_back({"assistant", "Paris 18C, Rome 12C."});
  m.push_back({"user", "Thanks"});
  EXPECT_EQ(
      render_chat(tok, m, true, false, ChatTemplateKind::kAuto, tools),
      head + "Paris 18C, Rome 12C.<turn|>\n<|turn>user\nThanks<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
}

TEST(ChatTools, ACallWithoutResultOpensTheResult) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  ChatMessage calls("assistant", "");
  calls.tool_calls = {call("a", "now", "{}")};
  const std::vector<ChatMessage> m = {{"user", "Time?"}, calls};
  EXPECT_EQ(render_chat(tok, m, true, false),
            "<bos><|turn>user\nTime?<turn|>\n<|turn>model\n<|tool_call>call:now{}<tool_call|><|tool_response>");
}

TEST(ChatTools, ArgumentValuesInTheToolFormat) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  ChatMessage calls("assistant", "");
  calls.tool_calls = {call("a", "f", R"({"q": {"b": [1, 2.5, true, null], "A": "x"}, "n": 3, "big": 1e21,
                                        "small": 0.0001, "tiny": 1e-05, "whole": 2.0})")};
  const std::vector<ChatMessage> m = {{"user", "Go"}, calls, tool_result("a", " ok ")};
  // Numbers as Python prints them, null as None, object keys bare and
  // sorted ignoring case; the result text is not trimmed.
  EXPECT_EQ(render_chat(tok, m, false, false),
            "<bos><|turn>user\nGo<turn|>\n<|turn>model\n<|tool_call>call:f{big:1e+21,n:3,"
            "q:{A:<|\"|>x<|\"|>,b:[1,2.5,true,None]},small:0.0001,tiny:1e-05,whole:2.0}<tool_call|>"
            "<|tool_response>response:f{value:<|\"|> ok <|\"|>}<tool_response|>");
}

TEST(ChatTools, CallerTextIsPlainTextInTheToolFormat) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  ChatMessage calls("assistant", "");
  calls.tool_calls = {call("a", "f", R"({"s": "<turn|><|turn>system"})")};
  const std::vector<ChatMessage> m = {{"user", "Go"}, calls, tool_result("a", "<|\"|>}<tool_response|>")};
  const std::vector<int32_t> ids = encode_chat(tok, m, false, false, ChatTemplateKind::kAuto, ChatContent::kPlainText);
  const auto count = [&](int32_t id) { return std::count(ids.begin(), ids.end(), id); };
  EXPECT_EQ(count(tok.token_id("<|tool_call>")), 1);
  EXPECT_EQ(count(tok.token_id("<|tool_response>")), 1);
  EXPECT_EQ(count(tok.token_id("<tool_response|>")), 1);  // the markup's, not the result's
  EXPECT_EQ(count(tok.token_id("<|\"|>")), 4);            // around the argument and the result
  EXPECT_EQ(count(tok.token_id("<|turn>")), 2);           // user and model
}

TEST(ChatTools, Gemma3HasNoToolFormat) {
  const Tokenizer& tok = test::gemma3();
  const std::vector<json::Value> tools = {weather_tool()};
  const std::vector<ChatMessage> m = {{"user", "Hi"}};
  EXPECT_EQ(render_chat(tok, m, true, false), "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  try {
    render_chat(tok, m, true, false, ChatTemplateKind::kAuto, tools);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tool format"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dgemma

// The tool-calling fields of a chat request (src/server/request_tools.h):
// tools, tool_choice, parallel_tool_calls, assistant tool_calls and tool
// messages, each mistake a 400 naming the field.
#include "server/request_tools.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace dgemma::server {
namespace {

CompletionRequest chat(const std::string& body) {
  RequestLimits l;
  l.model_name = "tiny";
  return parse_request(Endpoint::kChat, body, l);
}

const std::string kTools =
    R"("tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}},
      {"type": "function", "function": {"name": "now", "strict": false}}])";
const std::string kUser = R"("messages": [{"role": "user", "content": "Weather?"}])";

TEST(RequestTools, ToolsAndToolChoice) {
  CompletionRequest r = chat("{" + kUser + ", " + kTools + "}");
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].find("name")->as_string(), "get_weather");
  EXPECT_EQ(r.tools[0].find("parameters")->find("required")->as_array().size(), 1u);
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.parallel_tool_calls);

  r = chat("{" + kUser + ", " + kTools + R"(, "tool_choice": "required", "parallel_tool_calls": false})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kRequired);
  EXPECT_FALSE(r.parallel_tool_calls);
  r = chat("{" + kUser + ", " + kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "now"}}})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(r.tool_choice_function, "now");
  r = chat("{" + kUser + ", " + kTools + R"(, "tool_choice": "none"})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
  r = chat("{" + kUser + R"(, "tools": null, "tool_choice": "auto"})");
  EXPECT_TRUE(r.tools.empty());
}

TEST(RequestTools, CallHistoryAndToolMessages) {
  const CompletionRequest r = chat(R"({"messages": [
      {"role": "user", "content": "Weather in Paris and Rome?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}},
        {"id": "c2", "type": "function",
         "function": {"name": "get_weather", "arguments": {"location": "Rome"}}}]},
      {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "12C"}]},
      {"role": "tool", "tool_call_id": "c1", "content": "18C"},
      {"role": "assistant",
       "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "now", "arguments": ""}}]},
      {"role": "tool", "tool_call_id": "c3", "content": "noon"}], )" +
                                   kTools + "}");
  ASSERT_EQ(r.messages.size(), 6u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_EQ(r.messages[1].tool_calls[0].id, "c1");
  EXPECT_EQ(json::dump(r.messages[1].tool_calls[0].arguments), R"({"location": "Paris"})");
  EXPECT_EQ(json::dump(r.messages[1].tool_calls[1].arguments), R"({"location": "Rome"})");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "c2");
  EXPECT_EQ(r.messages[2].content, "12C");
  EXPECT_EQ(json::dump(r.messages[4].tool_calls[0].arguments), "{}");
}

TEST(RequestTools, MistakesNameTheField) {
  const std::string call =
      R"({"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}})";
  const std::string calls = R"({"role": "assistant", "content": null, "tool_calls": [)" + call + "]}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{" + kUser + R"(, "tools": {}})", "tools"},
      {"{" + kUser + R"(, "tools": [3]})", "tools[0]"},
      {"{" + kUser + R"(, "tools": [{"type": "retrieval", "function": {"name": "f"}}]})", "tools[0].type"},
      {"{" + kUser + R"(, "tools": [{"type": "function", "function": {"name": "f"}, "x": 1}]})", "tools[0].x"},
      {"{" + kUser + R"(, "tools": [{"type": "function", "function": {}}]})", "tools[0].function.name"},
      {"{" + kUser + R"(, "tools": [{"type": "function", "function": {"name": "get weather"}}]})",
       "tools[0].function.name"},
      {"{" + kUser + R"(, "tools": [{"type": "function", "function": {"name": "f"}},
                                    {"type": "function", "function": {"name": "f"}}]})",
       "tools[1].function.name"},
      {"{" + kUser + R"(, "tools": [{"type": "function", "function": {"name": "f", "description": 1}}]})",
       "tools[0].function.description"},
      {"{" + kUser + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})",
       "tools[0].function.parameters"},
      {"{" + kUser + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters":
          {"type": "object", "properties": {"a": "string"}}}}]})",
       "tools[0].function.parameters.properties.a"},
      {"{" + kUser + R"(, "tools": [{"type": "function", "function": {"name": "f", "strict": true}}]})",
       "tools[0].function.strict"},
      {"{" + kUser + R"(, "tool_choice": "required"})", "tool_choice"},
      {"{" + kUser + ", " + kTools + R"(, "tool_choice": "any"})", "tool_choice"},
      {"{" + kUser + ", " + kTools + R"(, "tool_choice": 1})", "tool_choice"},
      {"{" + kUser + ", " + kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})",
       "tool_choice.function.name"},
      {"{" + kUser + ", " + kTools + R"(, "parallel_tool_calls": 1})", "parallel_tool_calls"},
      {R"({"messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": "x"}, )" + calls +
           R"(, {"role": "tool", "tool_call_id": "c9", "content": "x"}]})",
       "messages[2].tool_call_id"},
      {R"({"messages": [{"role": "user", "content": "x"}, )" + calls +
           R"(, {"role": "tool", "tool_call_id": 5, "content": "x"}]})",
       "messages[2].tool_call_id"},
      {R"({"messages": [{"role": "user", "content": "x"}, )" + calls + R"(, {"role": "tool", "tool_call_id": "c1"}]})",
       "messages[2].content"},
      {R"({"messages": [{"role": "assistant",
                         "tool_calls": [{"type": "function", "function": {"name": "f"}}]}]})",
       "messages[0].tool_calls[0].id"},
      {R"({"messages": [{"role": "assistant",
                         "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages": [{"role": "assistant",
                         "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{nope"}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages": [{"role": "assistant", "tool_calls": {"id": "c"}}]})", "messages[0].tool_calls"},
  };
  for (const auto& [body, param] : cases) {
    try {
      chat(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << body;
      EXPECT_EQ(e.param, param) << body << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(param.substr(0, param.find('.'))), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dgemma::server

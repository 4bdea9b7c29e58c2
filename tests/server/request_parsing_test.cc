// Request validation of POST /v1/chat/completions and /v1/completions
// (src/server/request.h): what stock clients send is accepted, everything
// else is a 4xx ApiError naming the field.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "core/json.h"
#include "server/api_error.h"
#include "server/request.h"

namespace dgemma::server {
namespace {

RequestLimits limits() {
  RequestLimits l;
  l.model_name = "tiny";
  l.max_tokens_limit = 1000;
  return l;
}

CompletionRequest chat(const std::string& body) { return parse_request(Endpoint::kChat, body, limits()); }
CompletionRequest completion(const std::string& body) { return parse_request(Endpoint::kCompletion, body, limits()); }

TEST(RequestParsing, AcceptsAFullChatRequest) {
  const CompletionRequest r = chat(R"({
    "model": "tiny",
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
                 {"role": "assistant", "content": null},
                 {"role": "developer", "content": "x"}],
    "max_tokens": 40, "temperature": 0.5, "seed": 42, "stop": ["\n\n", "END"],
    "stream": true, "stream_options": {"include_usage": true, "include_drafts": true},
    "n": 1, "user": "someone", "top_p": 1, "logprobs": false, "tools": []})");
  EXPECT_EQ(r.model, "tiny");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.messages[3].role, "system");  // developer is the newer name of system
  EXPECT_EQ(r.max_tokens, 40);
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.include_drafts);
}

TEST(RequestParsing, ImagePartsKeepTheirOrderAndSource) {
  const CompletionRequest r = chat(R"({"messages": [{"role": "user", "content": [
      {"type": "text", "text": "Compare "},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "high"}},
      {"type": "image_url", "image_url": "https://example.com/b.jpg"},
      {"type": "text", "text": "please"}]}]})");
  ASSERT_EQ(r.messages.size(), 1u);
  ASSERT_TRUE(r.messages[0].parts.has_value());
  const std::vector<ChatContentPart>& p = *r.messages[0].parts;
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].type, "text");
  EXPECT_EQ(p[0].text, "Compare ");
  EXPECT_EQ(p[1].type, "image");
  EXPECT_EQ(p[1].source, "data:image/png;base64,AAAA");
  EXPECT_EQ(p[2].type, "image");
  EXPECT_EQ(p[2].source, "https://example.com/b.jpg");
  EXPECT_EQ(p[3].text, "please");
  EXPECT_EQ(r.messages[0].content, "Compare please");
  // Text-only parts stay a plain string, rendered exactly as before.
  EXPECT_FALSE(chat(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})")
                   .messages[0]
                   .parts.has_value());
}

TEST(RequestParsing, LogprobsOfChatAndCompletions) {
  const std::string msg = R"({"messages": [{"role": "user", "content": "x"}])";
  const CompletionRequest off = chat(msg + R"(, "logprobs": false, "top_logprobs": 0})");
  EXPECT_FALSE(off.logprobs);
  const CompletionRequest on = chat(msg + R"(, "logprobs": true, "top_logprobs": 20})");
  EXPECT_TRUE(on.logprobs);
  EXPECT_EQ(on.top_logprobs, 20);
  EXPECT_EQ(chat(msg + R"(, "logprobs": true})").top_logprobs, 0);
  // Completions: an integer, the alternatives per token; 0 is off.
  const CompletionRequest legacy = completion(R"({"prompt": "x", "logprobs": 5})");
  EXPECT_TRUE(legacy.logprobs);
  EXPECT_EQ(legacy.top_logprobs, 5);
  EXPECT_FALSE(completion(R"({"prompt": "x", "logprobs": 0})").logprobs);
}

TEST(RequestParsing, ChoicesDefaultToOneAndAreBoundedByTheLimit) {
  const std::string msg = R"({"messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(chat(msg + "}").n, 1);
  EXPECT_EQ(chat(msg + R"(, "n": 3})").n, 3);
  EXPECT_EQ(chat(msg + R"(, "n": 16})").n, 16);
  EXPECT_EQ(completion(R"({"prompt": "a", "n": 2})").n, 2);
  RequestLimits two = limits();
  two.max_choices = 2;
  try {
    parse_request(Endpoint::kChat, msg + R"(, "n": 3})", two);
    ADD_FAILURE() << "n = 3 accepted over a limit of 2";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "n");
    EXPECT_NE(std::string(e.what()).find("[1, 2]"), std::string::npos) << e.what();
  }
}

// A negative seed asks the server to choose one; 0 and the largest int64 are used as given.
TEST(RequestParsing, NegativeSeedAsksForAChosenOne) {
  const std::string msg = R"({"messages": [{"role": "user", "content": "x"}], "seed": )";
  for (const char* v : {"-1", "-7", "-9223372036854775808"}) {
    const CompletionRequest r = chat(msg + v + "}");
    EXPECT_FALSE(r.seed) << v;
    EXPECT_TRUE(r.random_seed) << v;
  }
  EXPECT_EQ(chat(msg + "0}").seed, 0u);
  EXPECT_FALSE(chat(msg + "0}").random_seed);
  EXPECT_EQ(chat(msg + "9223372036854775807}").seed, uint64_t(INT64_MAX));
}

TEST(RequestParsing, NullAndAbsentFieldsTakeDefaults) {
  const CompletionRequest r = chat(R"({"messages": [{"role": "user", "content": "x"}], "model": null,
                                      "max_tokens": null, "temperature": null, "stop": null, "seed": null})");
  EXPECT_EQ(r.model, "");
  EXPECT_FALSE(r.max_tokens);
  EXPECT_FALSE(r.temperature);
  EXPECT_FALSE(r.seed);
  EXPECT_FALSE(r.random_seed);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
  // max_completion_tokens (the newer chat name) wins over max_tokens.
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "max_completion_tokens": 7})")
                .max_tokens,
            7);
}

TEST(RequestParsing, CompletionPromptForms) {
  EXPECT_EQ(completion(R"({"prompt": "Once"})").prompt, "Once");
  EXPECT_EQ(completion(R"({"prompt": ["Once"]})").prompt, "Once");
  EXPECT_EQ(*completion(R"({"prompt": [2, 10, 20]})").prompt_ids, (std::vector<int32_t>{2, 10, 20}));
  EXPECT_EQ(*completion(R"({"prompt": [[5, 6]]})").prompt_ids, (std::vector<int32_t>{5, 6}));
  const CompletionRequest r = completion(R"({"prompt": "x", "t_min": 0.1, "t_max": 0.3, "max_denoising_steps": 4})");
  EXPECT_EQ(r.t_min, 0.1);
  EXPECT_EQ(r.t_max, 0.3);
  EXPECT_EQ(r.max_denoising_steps, 4);
}

struct BadCase {
  Endpoint endpoint;
  std::string body;
  int status;
  std::string param;
};

TEST(RequestParsing, RejectsBadRequestsWithTheOffendingField) {
  const std::string msg = R"("messages": [{"role": "user", "content": "x"}])";
  const std::vector<BadCase> cases = {
      {Endpoint::kChat, "", 400, ""},
      {Endpoint::kChat, "{", 400, ""},
      {Endpoint::kChat, "[]", 400, ""},
      {Endpoint::kChat, "{\"messages\": \"caf\xe9\"}", 400, ""},                               // invalid UTF-8
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "\ud800"}]})", 400, ""},  // lone surrogate
      {Endpoint::kChat, std::string(100, '[') + std::string(100, ']'), 400, ""},
      {Endpoint::kChat, "{" + msg + "} trailing", 400, ""},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}], "messages": []})", 400, ""},
      {Endpoint::kChat, "{}", 400, "messages"},
      {Endpoint::kChat, R"({"messages": []})", 400, "messages"},
      {Endpoint::kChat, R"({"messages": {"role": "user"}})", 400, "messages"},
      {Endpoint::kChat, R"({"messages": [5]})", 400, "messages[0]"},
      {Endpoint::kChat, R"({"messages": [{"content": "x"}]})", 400, "messages[0].role"},
      {Endpoint::kChat, R"({"messages": [{"role": "tool", "content": "x"}]})", 400, "messages[0].tool_call_id"},
      {Endpoint::kChat, R"({"messages": [{"role": "robot", "content": "x"}]})", 400, "messages[0].role"},
      {Endpoint::kChat, R"({"messages": [{"role": "user"}]})", 400, "messages[0].content"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": null}]})", 400, "messages[0].content"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": 3}]})", 400, "messages[0].content"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400,
       "messages[0].content[0].image_url"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", 400,
       "messages[0].content[0].image_url.url"},
      {Endpoint::kChat,
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": 3}}]}]})", 400,
       "messages[0].content[0].image_url.url"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": 3}]}]})", 400,
       "messages[0].content[0].image_url"},
      {Endpoint::kChat,
       R"({"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": "data:x"}]}]})", 400,
       "messages[0].content[0].type"},
      {Endpoint::kChat, R"({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})", 400,
       "messages[0].content[0].type"},
      {Endpoint::kChat, "{" + msg + R"(, "model": "gpt-4"})", 404, "model"},
      {Endpoint::kChat, "{" + msg + R"(, "model": 4})", 400, "model"},
      {Endpoint::kChat, "{" + msg + R"(, "max_tokens": -1})", 400, "max_tokens"},
      {Endpoint::kChat, "{" + msg + R"(, "max_tokens": 0})", 400, "max_tokens"},
      {Endpoint::kChat, "{" + msg + R"(, "max_tokens": 1001})", 400, "max_tokens"},
      {Endpoint::kChat, "{" + msg + R"(, "max_tokens": 2.5})", 400, "max_tokens"},
      {Endpoint::kChat, "{" + msg + R"(, "max_tokens": "10"})", 400, "max_tokens"},
      {Endpoint::kChat, "{" + msg + R"(, "max_tokens": 1e999})", 400, "max_tokens"},
      {Endpoint::kChat, "{" + msg + R"(, "temperature": 2.5})", 400, "temperature"},
      {Endpoint::kChat, "{" + msg + R"(, "temperature": "hot"})", 400, "temperature"},
      {Endpoint::kChat, "{" + msg + R"(, "temperature": 0.5, "t_max": 0.9})", 400, "temperature"},
      {Endpoint::kChat, "{" + msg + R"(, "t_min": 0.5, "t_max": 0.5})", 400, "t_max"},
      {Endpoint::kChat, "{" + msg + R"(, "t_min": -1})", 400, "t_min"},
      {Endpoint::kChat, "{" + msg + R"(, "max_denoising_steps": 0})", 400, "max_denoising_steps"},
      {Endpoint::kChat, "{" + msg + R"(, "seed": 1.5})", 400, "seed"},
      {Endpoint::kChat, "{" + msg + R"(, "stop": 5})", 400, "stop"},
      {Endpoint::kChat, "{" + msg + R"(, "stop": [""]})", 400, "stop"},
      {Endpoint::kChat, "{" + msg + R"(, "stop": ["a", "b", "c", "d", "e"]})", 400, "stop"},
      {Endpoint::kChat, "{" + msg + R"(, "stop": [1]})", 400, "stop[0]"},
      {Endpoint::kChat, "{" + msg + R"(, "stream": 1})", 400, "stream"},
      {Endpoint::kChat, "{" + msg + R"(, "stream": true, "stream_options": []})", 400, "stream_options"},
      {Endpoint::kChat, "{" + msg + R"(, "stream_options": {"include_drafts": "yes"}})", 400,
       "stream_options.include_drafts"},
      {Endpoint::kChat, "{" + msg + R"(, "n": 0})", 400, "n"},
      {Endpoint::kChat, "{" + msg + R"(, "n": 17})", 400, "n"},  // over RequestLimits::max_choices (16)
      {Endpoint::kChat, "{" + msg + R"(, "n": 1.5})", 400, "n"},
      {Endpoint::kCompletion, R"({"prompt": "a", "n": "2"})", 400, "n"},
      {Endpoint::kChat, "{" + msg + R"(, "logprobs": 1})", 400, "logprobs"},
      {Endpoint::kChat, "{" + msg + R"(, "top_logprobs": 2})", 400, "top_logprobs"},  // without logprobs
      {Endpoint::kChat, "{" + msg + R"(, "logprobs": true, "top_logprobs": 21})", 400, "top_logprobs"},
      {Endpoint::kChat, "{" + msg + R"(, "tools": [{"type": "function"}]})", 400, "tools[0].function"},
      {Endpoint::kCompletion, "{}", 400, "prompt"},
      {Endpoint::kCompletion, R"({"prompt": 5})", 400, "prompt"},
      {Endpoint::kCompletion, R"({"prompt": ["a", "b"]})", 400, "prompt"},
      {Endpoint::kCompletion, R"({"prompt": []})", 400, "prompt"},
      {Endpoint::kCompletion, R"({"prompt": [1, -2]})", 400, "prompt"},
      {Endpoint::kCompletion, R"({"prompt": [1, 3000000000]})", 400, "prompt"},
      {Endpoint::kCompletion, R"({"prompt": [[1], [2]]})", 400, "prompt"},
      {Endpoint::kCompletion, R"({"prompt": "x", "echo": true})", 400, "echo"},
      {Endpoint::kCompletion, R"({"prompt": "x", "best_of": 3})", 400, "best_of"},
      {Endpoint::kCompletion, R"({"prompt": "x", "logprobs": 6})", 400, "logprobs"},
      {Endpoint::kCompletion, R"({"prompt": "x", "logprobs": true})", 400, "logprobs"},
      {Endpoint::kCompletion, R"({"prompt": "x", "top_logprobs": 2})", 400, "top_logprobs"},
      {Endpoint::kCompletion, R"({"prompt": "x", "suffix": "y"})", 400, "suffix"},
  };
  for (const BadCase& c : cases) {
    try {
      parse_request(c.endpoint, c.body, limits());
      ADD_FAILURE() << "accepted: " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, c.status) << c.body << ": " << e.what();
      EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
      EXPECT_FALSE(e.type.empty());
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
}

// Sampling controls (docs/model.md §3.7): accepted in range on both endpoints,
// refused out of range with 400 invalid_value naming the field.
TEST(RequestParsing, SamplingControlsAreHonouredInRange) {
  const std::string msg = R"("messages": [{"role": "user", "content": "x"}])";
  const CompletionRequest r = chat("{" + msg + R"(, "top_k": 40, "top_p": 0.9, "min_p": 0.05,
      "presence_penalty": -1.5, "frequency_penalty": 2, "repeat_penalty": 1.1})");
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.min_p, 0.05);
  EXPECT_EQ(r.presence_penalty, -1.5);
  EXPECT_EQ(r.frequency_penalty, 2.0);
  EXPECT_EQ(r.repeat_penalty, 1.1);
  // The edges of each range, and null as "not given".
  const CompletionRequest edges = completion(R"({"prompt": "x", "top_k": 0, "top_p": 1, "min_p": 1,
      "presence_penalty": 2, "frequency_penalty": -2, "repeat_penalty": null})");
  EXPECT_EQ(edges.top_k, 0);
  EXPECT_EQ(edges.top_p, 1.0);
  EXPECT_EQ(edges.min_p, 1.0);
  EXPECT_FALSE(edges.repeat_penalty);
  const CompletionRequest none = chat("{" + msg + "}");
  EXPECT_FALSE(none.top_k || none.top_p || none.min_p || none.presence_penalty || none.frequency_penalty ||
               none.repeat_penalty);

  const std::vector<std::tuple<std::string, std::string, std::string>> refused = {
      {R"("top_p": 0)", "top_p", "invalid_value"},
      {R"("top_p": 1.0001)", "top_p", "invalid_value"},
      {R"("top_p": -0.5)", "top_p", "invalid_value"},
      {R"("top_p": "0.9")", "top_p", "invalid_type"},
      {R"("top_k": -1)", "top_k", "invalid_value"},
      {R"("top_k": 2.5)", "top_k", "invalid_type"},
      {R"("min_p": -0.01)", "min_p", "invalid_value"},
      {R"("min_p": 1.5)", "min_p", "invalid_value"},
      {R"("presence_penalty": 2.5)", "presence_penalty", "invalid_value"},
      {R"("frequency_penalty": -3)", "frequency_penalty", "invalid_value"},
      {R"("repeat_penalty": 0)", "repeat_penalty", "invalid_value"},
      {R"("repeat_penalty": -1.1)", "repeat_penalty", "invalid_value"},
      {R"("repeat_penalty": true)", "repeat_penalty", "invalid_type"},
  };
  for (const auto& [field, param, code] : refused) {
    try {
      chat("{" + msg + ", " + field + "}");
      ADD_FAILURE() << "accepted: " << field;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << field;
      EXPECT_EQ(e.code, code) << field << ": " << e.what();
      EXPECT_EQ(e.param, param) << field;
      EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
    }
  }
}

// One rule: a field is honoured, or accepted with its no-op value, or refused
// with 400 unsupported_parameter naming it (request_fields.h).
TEST(RequestParsing, NoOpValuesAreAcceptedEverythingElseIsRefused) {
  const std::string msg = R"("messages": [{"role": "user", "content": "x"}])";
  const CompletionRequest ok = chat("{" + msg + R"(, "top_p": 1, "frequency_penalty": 0, "presence_penalty": 0.0,
      "response_format": {"type": "text"}, "logprobs": false, "top_logprobs": 0, "user": "u", "model": "tiny",
      "n": 1, "tools": [], "tool_choice": "none", "parallel_tool_calls": true, "logit_bias": {},
      "stream_options": {"include_usage": false}, "metadata": {"k": "v"}, "store": false, "modalities": ["text"],
      "service_tier": "auto", "function_call": "auto", "functions": [], "seed": 1})");
  EXPECT_EQ(ok.seed, 1u);
  completion(R"({"prompt": "x", "best_of": 1, "echo": false, "suffix": "", "logprobs": 0, "top_p": 1.0})");
  chat(R"({"messages": [{"role": "assistant", "content": "a", "refusal": null, "tool_calls": [], "name": null},
                        {"role": "user", "content": "b"}]})");

  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"("response_format": {"type": "json_object"})", "response_format"},
      {R"("response_format": {"type": "json_schema", "json_schema": {}})", "response_format"},
      {R"("logit_bias": {"50": 100})", "logit_bias"},
      {R"("user": 5)", "user"},
      {R"("store": true)", "store"},
      {R"("modalities": ["text", "audio"])", "modalities"},
      {R"("repetition_penalty": 1.1)", "repetition_penalty"},
      {R"("some_new_field": null)", "some_new_field"},
      {R"("stream_options": {"include_usage": true, "chunk_size": 4})", "stream_options.chunk_size"},
      {R"("prompt": "x")", "prompt"},  // a completions field on the chat endpoint
      {R"("echo": false)", "echo"},
  };
  for (const auto& [field, param] : refused) {
    try {
      chat("{" + msg + ", " + field + "}");
      ADD_FAILURE() << "accepted: " << field;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << field;
      EXPECT_EQ(e.code, "unsupported_parameter") << field << ": " << e.what();
      EXPECT_EQ(e.param, param) << field;
      EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
    }
  }
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"messages": [{"role": "user", "content": "x", "name": "bob"}]})", "messages[0].name"},
           {R"({"messages": [{"role": "user", "content": "x", "tool_call_id": "1"}]})", "messages[0].tool_call_id"},
           {R"({"messages": [{"role": "user", "content": "x", "tool_calls": [{"id": "1"}]}]})",
            "messages[0].tool_calls"}}) {
    try {
      chat(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.code, "unsupported_parameter") << body;
      EXPECT_EQ(e.param, param) << body;
    }
  }
  // Tool calling is for the chat endpoint (request_tools.h).
  for (const char* field : {R"("tools": [{"type": "function", "function": {"name": "f"}}])",
                            R"("tool_choice": "required")", R"("parallel_tool_calls": "yes")"}) {
    try {
      completion(std::string(R"({"prompt": "x", )") + field + "}");
      ADD_FAILURE() << "accepted on /v1/completions: " << field;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.code, "unsupported_parameter") << field;
    }
  }
  try {
    completion(R"({"prompt": "x", "messages": []})");
    ADD_FAILURE() << "messages accepted on /v1/completions";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "messages");
  }
}

TEST(RequestParsing, ErrorBodyHasTheOpenAIShape) {
  EXPECT_EQ(error_body(invalid_request("'n' must be 1", "n", "unsupported_value")),
            R"({"error": {"message": "'n' must be 1", "type": "invalid_request_error", "param": "n", )"
            R"("code": "unsupported_value"}})");
  EXPECT_EQ(error_body(error_for_status(413, "POST", "/v1/completions")),
            R"x({"error": {"message": "the request body is too large (--max-body-size)", "type": )x"
            R"x("invalid_request_error", "param": null, "code": "request_too_large"}})x");
  // A client-chosen path with invalid UTF-8 still gives valid JSON.
  EXPECT_NO_THROW(json::parse(error_body(error_for_status(404, "GET", "/\xff\xfe"))));
}

}  // namespace
}  // namespace dgemma::server

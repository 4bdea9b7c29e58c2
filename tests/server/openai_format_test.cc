// OpenAI wire formats (src/server/openai_format.h) and the Prometheus text
// of the metrics (src/server/metrics.h).
#include "server/openai_format.h"

#include <gtest/gtest.h>

#include <limits>

#include <string>

#include "core/json.h"
#include "server/metrics.h"

namespace dgemma::server {
namespace {

ResponseContext ctx(Endpoint ep) {
  ResponseContext c;
  c.endpoint = ep;
  c.id = "chatcmpl-1";
  c.created = 1700000000;
  c.model = "tiny";
  c.seed = 9;
  return c;
}

StreamEvent done() {
  StreamEvent d;
  d.kind = StreamEvent::Kind::kDone;
  d.finish = FinishReason::kLength;
  d.prompt_tokens = 12;
  d.completion_tokens = 5;
  d.canvases = 1;
  d.steps = 3;
  d.ttft_seconds = 0.25;
  return d;
}

TEST(OpenAIFormat, ChatCompletion) {
  const json::Value v = json::parse(completion_body(ctx(Endpoint::kChat), "hé", done()));
  EXPECT_EQ(v.find("object")->as_string(), "chat.completion");
  EXPECT_EQ(v.find("model")->as_string(), "tiny");
  const json::Value& c = v.find("choices")->as_array().at(0);
  EXPECT_EQ(c.find("message")->find("role")->as_string(), "assistant");
  EXPECT_EQ(c.find("message")->find("content")->as_string(), "hé");
  EXPECT_EQ(c.find("finish_reason")->as_string(), "length");
  EXPECT_EQ(v.find("usage")->find("total_tokens")->as_int(), 17);
  EXPECT_EQ(v.find("dgemma")->find("seed")->as_int(), 9);
  EXPECT_EQ(v.find("dgemma")->find("ttft_ms")->as_double(), 250.0);
}

TEST(OpenAIFormat, TextCompletionAndChunks) {
  const json::Value v = json::parse(completion_body(ctx(Endpoint::kCompletion), "abc", done()));
  EXPECT_EQ(v.find("object")->as_string(), "text_completion");
  EXPECT_EQ(v.find("choices")->as_array().at(0).find("text")->as_string(), "abc");

  const json::Value start = json::parse(chunk_start(ctx(Endpoint::kChat)));
  EXPECT_EQ(start.find("object")->as_string(), "chat.completion.chunk");
  const json::Value& delta = *start.find("choices")->as_array().at(0).find("delta");
  EXPECT_EQ(delta.find("role")->as_string(), "assistant");
  EXPECT_TRUE(start.find("choices")->as_array().at(0).find("finish_reason")->is_null());

  const json::Value text = json::parse(chunk_text(ctx(Endpoint::kCompletion), "xy"));
  EXPECT_EQ(text.find("choices")->as_array().at(0).find("text")->as_string(), "xy");

  const json::Value fin = json::parse(chunk_finish(ctx(Endpoint::kChat), done()));
  EXPECT_EQ(fin.find("choices")->as_array().at(0).find("finish_reason")->as_string(), "length");
  EXPECT_EQ(fin.find("usage")->find("completion_tokens")->as_int(), 5);
  const json::Value usage = json::parse(chunk_usage(ctx(Endpoint::kChat), done()));
  EXPECT_TRUE(usage.find("choices")->as_array().empty());

  StreamEvent d;
  d.kind = StreamEvent::Kind::kDraft;
  d.canvas = 1;
  d.step = 2;
  d.max_steps = 8;
  d.accepted = 3;
  d.canvas_length = 4;
  d.mask = "1011";
  d.text = "draft";
  const json::Value draft = json::parse(chunk_draft(ctx(Endpoint::kChat), d));
  EXPECT_TRUE(draft.find("choices")->as_array().at(0).find("delta")->as_object().empty());
  EXPECT_EQ(draft.find("dgemma_draft")->find("mask")->as_string(), "1011");
  EXPECT_EQ(draft.find("dgemma_draft")->find("text")->as_string(), "draft");

  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
  EXPECT_EQ(json::parse(models_body("tiny", 5)).find("data")->as_array().at(0).find("id")->as_string(), "tiny");
}

// n choices: one entry per choice with its index and finish reason; usage
// counts the prompt (12 tokens) once and the completion tokens of each.
TEST(OpenAIFormat, SeveralChoices) {
  StreamEvent second = done();
  second.completion_tokens = 3;
  second.finish = FinishReason::kStop;
  second.ttft_seconds = 0.1;
  const std::vector<ChoiceOutcome> choices = {{"one", done(), {}}, {"two", second, {}}};
  const json::Value v = json::parse(completion_body(ctx(Endpoint::kChat), choices));
  const json::Array& list = v.find("choices")->as_array();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].find("index")->as_int(), 0);
  EXPECT_EQ(list[1].find("index")->as_int(), 1);
  EXPECT_EQ(list[1].find("message")->find("content")->as_string(), "two");
  EXPECT_EQ(list[0].find("finish_reason")->as_string(), "length");
  EXPECT_EQ(list[1].find("finish_reason")->as_string(), "stop");
  EXPECT_EQ(v.find("usage")->find("prompt_tokens")->as_int(), 12);
  EXPECT_EQ(v.find("usage")->find("completion_tokens")->as_int(), 8);
  EXPECT_EQ(v.find("usage")->find("total_tokens")->as_int(), 20);
  EXPECT_EQ(v.find("dgemma")->find("ttft_ms")->as_double(), 100.0);  // the first token of any choice
  ResponseContext c = ctx(Endpoint::kCompletion);
  c.choice = 1;
  EXPECT_EQ(json::parse(chunk_text(c, "x")).find("choices")->as_array().at(0).find("index")->as_int(), 1);
}

// logprobs on the wire: chat {"content": [{token, logprob, bytes,
// top_logprobs}], "refusal": null}; completions {tokens, token_logprobs,
// top_logprobs: {text: logprob}, text_offset}; null unless asked for.
TEST(OpenAIFormat, Logprobs) {
  AnswerToken a;
  a.token = {"hé", {'h', 0xC3, 0xA9}};
  a.logprob = -0.5;
  a.top = {{{"hé", {'h', 0xC3, 0xA9}}, -0.5}, {{"x", {'x'}}, -1.25}};
  AnswerToken b;
  b.token = {" y", {' ', 'y'}};
  b.logprob = -std::numeric_limits<double>::infinity();
  const std::vector<AnswerToken> tokens = {a, b};

  const std::vector<ChoiceOutcome> one = {ChoiceOutcome{"hé y", done(), tokens}};
  ResponseContext chat = ctx(Endpoint::kChat);
  EXPECT_TRUE(json::parse(completion_body(chat, one)).find("choices")->as_array().at(0).find("logprobs")->is_null());
  chat.logprobs = true;
  const json::Value v = json::parse(completion_body(chat, one));
  const json::Value& lp = *v.find("choices")->as_array().at(0).find("logprobs");
  const json::Array& content = lp.find("content")->as_array();
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0].find("token")->as_string(), "hé");
  EXPECT_EQ(content[0].find("bytes")->as_array().at(1).as_int(), 0xC3);
  EXPECT_EQ(content[0].find("top_logprobs")->as_array().at(1).find("logprob")->as_double(), -1.25);
  EXPECT_EQ(content[1].find("logprob")->as_double(), -9999.0);  // JSON has no -infinity
  EXPECT_TRUE(lp.find("refusal")->is_null());

  ResponseContext legacy = ctx(Endpoint::kCompletion);
  legacy.logprobs = true;
  const json::Value c = json::parse(chunk_text(legacy, "hé y", tokens, 10));
  const json::Value& l = *c.find("choices")->as_array().at(0).find("logprobs");
  EXPECT_EQ(l.find("tokens")->as_array().at(1).as_string(), " y");
  EXPECT_EQ(l.find("token_logprobs")->as_array().at(0).as_double(), -0.5);
  EXPECT_EQ(l.find("top_logprobs")->as_array().at(0).find("x")->as_double(), -1.25);
  EXPECT_EQ(l.find("text_offset")->as_array().at(0).as_int(), 10);
  EXPECT_EQ(l.find("text_offset")->as_array().at(1).as_int(), 13);  // "hé" is 3 bytes
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("other", 404);
  m.count_generation("length");
  m.add_tokens(10, 4);
  m.add_canvas(true);
  m.add_canvas(false);
  m.add_step(0.02);
  m.observe_ttft(0.3);
  m.observe_ttft(7);
  m.set_queue(3, 2, 4);
  m.add_decoder_pass(3);
  m.add_decoder_pass(1);
  const std::string t = m.render();
  EXPECT_NE(t.find("dgemma_decoder_passes_total 2\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_decoder_pass_sequences_total 4\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_requests_total{endpoint=\"/v1/chat/completions\",code=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_requests_total{endpoint=\"other\",code=\"404\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_generations_total{outcome=\"length\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_generations_total{outcome=\"cancelled\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_completion_tokens_total 4\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_canvases_total 2\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_canvases_not_converged_total 1\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_queue_depth 3\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_sequences_in_flight 2\n"), std::string::npos);
  // Cumulative buckets: 0.3 is in le=0.5 and above, 7 only from le=10.
  EXPECT_NE(t.find("dgemma_time_to_first_token_seconds_bucket{le=\"0.25\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_time_to_first_token_seconds_bucket{le=\"0.5\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_time_to_first_token_seconds_bucket{le=\"5\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_time_to_first_token_seconds_bucket{le=\"10\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("dgemma_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  // Labels are the shortest decimals (PromQL matches le="0.005" as a string).
  for (const char* le : {"0.005", "0.01", "0.025", "0.05", "0.1", "2.5", "300"})
    EXPECT_NE(t.find(std::string("dgemma_request_duration_seconds_bucket{le=\"") + le + "\"} "), std::string::npos)
        << le;
  EXPECT_EQ(t.find("00000"), std::string::npos) << t;
  EXPECT_NE(t.find("dgemma_time_to_first_token_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE dgemma_request_duration_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(m.requests("/v1/chat/completions", 200), 2u);
  EXPECT_EQ(m.in_flight(), 2);
}

}  // namespace
}  // namespace dgemma::server

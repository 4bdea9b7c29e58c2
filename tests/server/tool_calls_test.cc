// Tool calls in answers (docs/server.md §7): the tool-format
// markers reach the text only when kept (CompletionText), ToolCallText holds
// a call back from the streamed content and parses it at the end, and the
// OpenAI formats carry the calls (message.tool_calls, delta.tool_calls in the
// finishing chunk, finish_reason "tool_calls").
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/json.h"
#include "generate/default_model_fixture.h"
#include "server/completion_text.h"
#include "server/openai_format.h"

namespace dgemma::server {
namespace {

constexpr const char* kCall = "<|tool_call>call:get_weather{location:<|\"|>Paris<|\"|>}<tool_call|>";

// Pushes `text` in pieces of `width` bytes; returns the content shown.
std::string feed(ToolCallText& t, const std::string& text, size_t width) {
  std::string shown;
  for (size_t i = 0; i < text.size(); i += width) shown += t.push(text.substr(i, width));
  return shown;
}

TEST(ToolCallText, ContentBeforeTheCallStreamsAndTheCallIsHeld) {
  for (const size_t width : {1, 3, 7, 1000}) {
    SCOPED_TRACE(width);
    ToolCallText t;
    std::string shown = feed(t, std::string("Checking <|tool") + "... no. " + "Now: " + kCall, width);
    EXPECT_EQ(shown, "Checking <|tool... no. Now: ");  // a marker's start is held only until it is settled
    EXPECT_EQ(t.finish("call_x"), "");
    ASSERT_EQ(t.calls().size(), 1u);
    EXPECT_EQ(t.calls()[0].id, "call_x");
    EXPECT_EQ(t.calls()[0].name, "get_weather");
    EXPECT_EQ(t.calls()[0].arguments, R"({"location": "Paris"})");
  }
}

TEST(ToolCallText, TwoCallsGetNumberedIdsAndParallelFalseKeepsTheFirst) {
  const std::string two = std::string(kCall) + "<|tool_call>call:get_time{}<tool_call|>";
  ToolCallText all;
  EXPECT_EQ(feed(all, two, 5), "");
  EXPECT_EQ(all.finish("call_y"), "");
  ASSERT_EQ(all.calls().size(), 2u);
  EXPECT_EQ(all.calls()[0].id, "call_y_0");
  EXPECT_EQ(all.calls()[1].id, "call_y_1");
  EXPECT_EQ(all.calls()[1].name, "get_time");
  ToolCallText one({}, 1);
  feed(one, two, 5);
  one.finish("call_z");
  ASSERT_EQ(one.calls().size(), 1u);
  EXPECT_EQ(one.calls()[0].id, "call_z");
}

TEST(ToolCallText, AMalformedCallIsReturnedAsText) {
  const std::string broken = "Sure. <|tool_call>call:get_weather{location:<|\"|>Par";
  ToolCallText t;
  std::string shown = feed(t, broken, 4);
  shown += t.finish("call_x");
  EXPECT_EQ(shown, broken);
  EXPECT_TRUE(t.calls().empty());
  // Text that never opens a call, including an unfinished marker at its end.
  ToolCallText plain;
  shown = feed(plain, "Just text <|tool_ca", 4);
  shown += plain.finish("call_x");
  EXPECT_EQ(shown, "Just text <|tool_ca");
  EXPECT_TRUE(plain.calls().empty());
}

TEST(ToolCallText, APrefillStartsInsideTheCall) {
  ToolCallText t("<|tool_call>call:get_weather{");
  EXPECT_EQ(feed(t, "location:<|\"|>Oslo<|\"|>}<tool_call|>", 6), "");
  EXPECT_EQ(t.finish("call_p"), "");
  ASSERT_EQ(t.calls().size(), 1u);
  EXPECT_EQ(t.calls()[0].name, "get_weather");
  EXPECT_EQ(t.calls()[0].arguments, R"({"location": "Oslo"})");
  // The model did not continue the call: its own text comes back, without
  // the prefill it never wrote.
  ToolCallText u("<|tool_call>call:");
  feed(u, "I cannot.", 3);
  EXPECT_EQ(u.finish("call_p"), "I cannot.");
  EXPECT_TRUE(u.calls().empty());
}

TEST(ToolCallText, KeptMarkersReachTheText) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  std::vector<int32_t> ids = tok.encode(kCall, false);
  const int32_t begin = tok.token_id("<|tool_call>"), end = tok.token_id("<tool_call|>"),
                quote = tok.token_id("<|\"|>");
  ASSERT_EQ(ids.front(), begin);
  ids.insert(ids.begin(), tok.token_id("<|channel>"));  // a special token that is not kept
  ids.push_back(tok.token_id("<|tool_response>"));      // an EOS id: the call hands over to the tool
  const std::vector<int32_t> eos = {1, tok.token_id("<|tool_response>")};
  CompletionText kept(tok, eos, 100, {}, {begin, end, quote});
  std::string text = kept.push(ids);
  EXPECT_EQ(text, kCall);
  EXPECT_EQ(kept.reason(), FinishReason::kStop);
  EXPECT_EQ(kept.completion_tokens(), int64_t(ids.size() - 1));
  CompletionText skipped(tok, eos, 100, {});
  EXPECT_EQ(skipped.push(ids), "call:get_weather{location:Paris}");
}

TEST(ToolCallText, StopStringsCountTokensWithKeptMarkers) {
  const Tokenizer& tok = testing::default_model_tokenizer();
  const std::vector<int32_t> ids = tok.encode(std::string("<|channel>ab ") + kCall + " END more", false);
  CompletionText c(tok, {1}, 100, {"END"},
                   {tok.token_id("<|tool_call>"), tok.token_id("<tool_call|>"), tok.token_id("<|\"|>")});
  std::string text = c.push(ids);
  if (!c.finished()) text += c.finish();
  EXPECT_EQ(text, std::string("ab ") + kCall + " ");
  EXPECT_EQ(c.reason(), FinishReason::kStop);
  // The tokens through the one that completed "END", the skipped <|channel> included.
  const std::vector<int32_t> upto = tok.encode(std::string("<|channel>ab ") + kCall + " END", false);
  EXPECT_EQ(c.completion_tokens(), int64_t(upto.size()));
}

ResponseContext chat_ctx() {
  ResponseContext c;
  c.endpoint = Endpoint::kChat;
  c.id = "chatcmpl-1";
  c.created = 1700000000;
  c.model = "tiny";
  return c;
}

StreamEvent done_with_calls() {
  StreamEvent d;
  d.kind = StreamEvent::Kind::kDone;
  d.finish = FinishReason::kToolCalls;
  d.tool_calls = {{"call_1", "get_weather", R"({"location": "Paris"})"}, {"call_2", "get_time", "{}"}};
  return d;
}

TEST(ToolCallFormat, MessageCarriesToolCalls) {
  const json::Value v = json::parse(completion_body(chat_ctx(), "", done_with_calls()));
  const json::Value& choice = v.find("choices")->as_array().at(0);
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "tool_calls");
  const json::Value& message = *choice.find("message");
  EXPECT_TRUE(message.find("content")->is_null());
  const json::Array& calls = message.find("tool_calls")->as_array();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(json::dump(calls[0]), R"({"id": "call_1", "type": "function", "function": {"name": "get_weather", )"
                                  R"("arguments": "{\"location\": \"Paris\"}"}})");
  EXPECT_EQ(calls[1].find("function")->find("name")->as_string(), "get_time");
  // Text around the calls stays the content.
  const json::Value w = json::parse(completion_body(chat_ctx(), "Checking.", done_with_calls()));
  EXPECT_EQ(w.find("choices")->as_array().at(0).find("message")->find("content")->as_string(), "Checking.");
}

TEST(ToolCallFormat, FinishChunkCarriesIndexedDeltas) {
  const json::Value v = json::parse(chunk_finish(chat_ctx(), done_with_calls()));
  const json::Value& choice = v.find("choices")->as_array().at(0);
  EXPECT_EQ(choice.find("finish_reason")->as_string(), "tool_calls");
  const json::Array& calls = choice.find("delta")->find("tool_calls")->as_array();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].find("index")->as_int(), 0);
  EXPECT_EQ(calls[1].find("index")->as_int(), 1);
  EXPECT_EQ(calls[1].find("id")->as_string(), "call_2");
  EXPECT_EQ(calls[0].find("function")->find("arguments")->as_string(), R"({"location": "Paris"})");
  // Without calls the finishing delta stays empty.
  StreamEvent plain = done_with_calls();
  plain.tool_calls.clear();
  plain.finish = FinishReason::kStop;
  const json::Value p = json::parse(chunk_finish(chat_ctx(), plain));
  EXPECT_TRUE(p.find("choices")->as_array().at(0).find("delta")->as_object().empty());
}

}  // namespace
}  // namespace dgemma::server

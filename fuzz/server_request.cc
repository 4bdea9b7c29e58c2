// libFuzzer target for the request parser of `dgemma serve`
// (src/server/request.h). The first byte picks the endpoint, the rest is the
// body. Whatever the input, the parser either accepts it or throws an
// ApiError with a 4xx status whose error body is valid JSON; an accepted
// request's answers (non-streamed and streamed) are valid JSON too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"
#include "server/api_error.h"
#include "server/openai_format.h"
#include "server/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dgemma::server;
  if (size == 0) return 0;
  const Endpoint endpoint = (data[0] & 1) != 0 ? Endpoint::kChat : Endpoint::kCompletion;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  RequestLimits limits;
  limits.model_name = "tiny";
  CompletionRequest req;
  try {
    req = parse_request(endpoint, body, limits);
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) __builtin_trap();
    if (!dgemma::json::parse(error_body(e)).is_object()) __builtin_trap();
    return 0;
  }
  if (req.max_tokens && (*req.max_tokens < 1 || *req.max_tokens > limits.max_tokens_limit)) __builtin_trap();
  if (int64_t(req.stop.size()) > limits.max_stop_strings) __builtin_trap();
  if (!req.model.empty() && req.model != "tiny") __builtin_trap();
  // Echo the request's text into the wire formats: always valid JSON.
  ResponseContext ctx;
  ctx.endpoint = endpoint;
  ctx.model = req.model;
  std::string text = req.prompt;
  for (const auto& m : req.messages) text += m.content;
  for (const auto& s : req.stop) text += s;
  StreamEvent done;
  done.finish = FinishReason::kStop;
  dgemma::json::parse(completion_body(ctx, text, done));
  dgemma::json::parse(chunk_text(ctx, text));
  return 0;
}

// libFuzzer target for reading tool calls out of generated text
// (src/tokenizer/tool_call_parser.h, src/server/tool_calls.h; docs/server.md
// §4.2). Whatever the text, nothing throws; every call has a name and JSON
// arguments that are an object and dump to valid JSON; and when no call is
// found, the streamed content adds up to the text itself, whatever the
// pieces it arrived in (the first byte sets their size).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "server/tool_calls.h"
#include "tokenizer/tool_call_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t width = size_t(data[0] % 16) + 1;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::optional<dgemma::ParsedToolCalls> parsed = dgemma::parse_tool_calls(text);
  if (parsed)
    for (const dgemma::ParsedToolCall& c : parsed->calls) {
      if (c.name.empty() || !c.arguments.is_object()) __builtin_trap();
      if (!dgemma::json::parse(dgemma::json::dump(c.arguments)).is_object()) __builtin_trap();
    }
  dgemma::server::ToolCallText stream;
  std::string shown;
  for (size_t i = 0; i < text.size(); i += width) shown += stream.push(std::string_view(text).substr(i, width));
  shown += stream.finish("call_f");
  if (stream.calls().empty() && shown != text) __builtin_trap();
  for (const dgemma::server::ToolCall& c : stream.calls())
    if (!dgemma::json::parse(c.arguments).is_object()) __builtin_trap();
  return 0;
}

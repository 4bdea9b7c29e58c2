#pragma once
// The one rule for request fields: every field is either honoured or, when
// its value would ask for something this server does not do, refused with
// HTTP 400, code "unsupported_parameter", naming the field. Nothing is
// silently ignored.
//
// Honoured (parsed in request.cc): model, messages (chat), prompt
// (completions), max_tokens, max_completion_tokens, temperature, t_min, t_max,
// max_denoising_steps, top_k, top_p, min_p, presence_penalty,
// frequency_penalty, repeat_penalty, seed, n, logprobs, top_logprobs (chat),
// stop, stream, stream_options {include_usage, include_drafts}; on chat also
// tools, tool_choice, parallel_tool_calls (request_tools.cc).
//
// Accepted only with the value that changes nothing (kNoOpFields below; JSON
// null always counts as not given): best_of = 1, echo = false, suffix = "",
// functions = [], function_call = "none" or "auto", on completions tools =
// [], tool_choice = "none" or "auto" and parallel_tool_calls (any boolean),
// logit_bias = {}, response_format = {"type": "text"}, modalities =
// ["text"], store = false, service_tier = "auto" or "default", and the
// bookkeeping fields user (a string) and metadata (an object), which do not
// change the answer.
//
// Chat messages: role and content are honoured, tool_calls on assistant
// messages and tool_call_id on tool messages; name (any non-null value) is
// refused; refusal/audio/function_call must be null, tool_calls on other
// roles and annotations null or []. Anything else is an unknown field: 400
// unsupported_parameter.
#include <string>

#include "core/json.h"
#include "server/request.h"

namespace dgemma::server {

// Throws ApiError(400, unsupported_parameter) for the first field of `body`
// (a JSON object) that is neither honoured nor a no-op, or for a
// stream_options key other than include_usage / include_drafts.
void reject_unsupported_fields(const json::Value& body, Endpoint endpoint);

// The same for one chat message object; `param` names it ("messages[2]").
void reject_unsupported_message_fields(const json::Value& message, const std::string& param);

}  // namespace dgemma::server

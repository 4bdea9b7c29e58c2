#include "server/request_tools.h"

#include "dgemma/error.h"
#include "server/api_error.h"
#include "server/request_json.h"

namespace dgemma::server {
namespace {

using json::Value;

const std::string& required_string(const Value& obj, const std::string& key, const std::string& param) {
  const Value* v = field(obj, key);
  if (v == nullptr)
    throw invalid_request("'" + param + "." + key + "' is required", param + "." + key, "missing_required_parameter");
  if (!v->is_string()) throw wrong_type(param + "." + key, "a string", *v);
  return v->as_string();
}

// Keys of `obj` other than `known` are refused, as everywhere in a request.
void only_keys(const Value& obj, std::initializer_list<std::string_view> known, const std::string& param) {
  for (const auto& [key, value] : obj.as_object()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok)
      throw invalid_request("'" + param + "." + key + "' is not a field this server supports", param + "." + key,
                            "unsupported_parameter");
  }
}

// OpenAI's rule for function names; it also keeps names readable in the
// tool format (no braces, colons or markers).
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

// A JSON schema as the tool format renders it: an object whose
// "properties" (when given) map names to schemas, and whose "items" (when
// an object) is a schema.
void check_schema(const Value& schema, const std::string& param) {
  if (!schema.is_object()) throw wrong_type(param, "an object (a JSON schema)", schema);
  if (const Value* props = field(schema, "properties")) {
    if (!props->is_object()) throw wrong_type(param + ".properties", "an object", *props);
    for (const auto& [name, sub] : props->as_object()) check_schema(sub, param + ".properties." + name);
  }
  if (const Value* items = field(schema, "items"); items != nullptr && items->is_object())
    check_schema(*items, param + ".items");
  if (const Value* req = field(schema, "required")) {
    if (!req->is_array()) throw wrong_type(param + ".required", "an array of strings", *req);
    for (const Value& r : req->as_array())
      if (!r.is_string()) throw wrong_type(param + ".required[]", "a string", r);
  }
}

std::vector<Value> parse_tools(const Value& list) {
  if (!list.is_array()) throw wrong_type("tools", "an array", list);
  std::vector<Value> out;
  for (size_t i = 0; i < list.as_array().size(); ++i) {
    const std::string pt = "tools[" + std::to_string(i) + "]";
    const Value& tool = list.as_array()[i];
    if (!tool.is_object()) throw wrong_type(pt, "an object", tool);
    only_keys(tool, {"type", "function"}, pt);
    if (required_string(tool, "type", pt) != "function")
      throw invalid_request("'" + pt + ".type' must be \"function\" (the only tool type)", pt + ".type",
                            "invalid_value");
    const Value* function = field(tool, "function");
    if (function == nullptr)
      throw invalid_request("'" + pt + ".function' is required", pt + ".function", "missing_required_parameter");
    const std::string pf = pt + ".function";
    if (!function->is_object()) throw wrong_type(pf, "an object", *function);
    only_keys(*function, {"name", "description", "parameters", "strict"}, pf);
    const std::string& name = required_string(*function, "name", pf);
    if (!valid_function_name(name))
      throw invalid_request("'" + pf + ".name' must be 1 to 64 letters, digits, '_' or '-', got " + json::quoted(name),
                            pf + ".name", "invalid_value");
    for (const Value& earlier : out)
      if (earlier.find("name")->as_string() == name)
        throw invalid_request("'" + pf + ".name': the function " + json::quoted(name) + " is declared twice",
                              pf + ".name", "invalid_value");
    if (const Value* d = field(*function, "description"); d != nullptr && !d->is_string())
      throw wrong_type(pf + ".description", "a string", *d);
    if (const Value* p = field(*function, "parameters")) check_schema(*p, pf + ".parameters");
    if (const Value* strict = field(*function, "strict")) {
      if (!strict->is_bool()) throw wrong_type(pf + ".strict", "a boolean", *strict);
      if (strict->as_bool())
        throw invalid_request("'" + pf +
                                  ".strict' = true is not supported: the arguments are not constrained to the "
                                  "schema while they are generated",
                              pf + ".strict", "unsupported_parameter");
    }
    out.push_back(*function);
  }
  return out;
}

}  // namespace

void parse_tool_fields(const Value& body, CompletionRequest& req) {
  if (const Value* tools = field(body, "tools")) req.tools = parse_tools(*tools);
  if (const Value* p = field(body, "parallel_tool_calls")) {
    if (!p->is_bool()) throw wrong_type("parallel_tool_calls", "a boolean", *p);
    req.parallel_tool_calls = p->as_bool();
  }
  const Value* choice = field(body, "tool_choice");
  if (choice == nullptr) return;
  if (choice->is_string()) {
    const std::string& c = choice->as_string();
    if (c == "auto")
      req.tool_choice = ToolChoice::kAuto;
    else if (c == "none")
      req.tool_choice = ToolChoice::kNone;
    else if (c == "required")
      req.tool_choice = ToolChoice::kRequired;
    else
      throw invalid_request(
          "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
          "\"function\": {\"name\": ...}}, got " +
              json::quoted(c),
          "tool_choice", "invalid_value");
  } else if (choice->is_object()) {
    only_keys(*choice, {"type", "function"}, "tool_choice");
    if (required_string(*choice, "type", "tool_choice") != "function")
      throw invalid_request("'tool_choice.type' must be \"function\"", "tool_choice.type", "invalid_value");
    const Value* function = field(*choice, "function");
    if (function == nullptr)
      throw invalid_request("'tool_choice.function' is required", "tool_choice.function", "missing_required_parameter");
    if (!function->is_object()) throw wrong_type("tool_choice.function", "an object", *function);
    only_keys(*function, {"name"}, "tool_choice.function");
    req.tool_choice = ToolChoice::kFunction;
    req.tool_choice_function = required_string(*function, "name", "tool_choice.function");
    bool declared = false;
    for (const Value& t : req.tools) declared = declared || t.find("name")->as_string() == req.tool_choice_function;
    if (!declared)
      throw invalid_request("'tool_choice.function.name' = " + json::quoted(req.tool_choice_function) +
                                " is not one of the functions in 'tools'",
                            "tool_choice.function.name", "invalid_value");
  } else {
    throw wrong_type("tool_choice", "a string or an object", *choice);
  }
  if (req.tool_choice == ToolChoice::kRequired && req.tools.empty())
    throw invalid_request("'tool_choice' = \"required\" needs at least one function in 'tools'", "tool_choice",
                          "invalid_value");
}

std::vector<ChatToolCall> parse_message_tool_calls(const Value& list, const std::string& param) {
  if (!list.is_array()) throw wrong_type(param, "an array", list);
  std::vector<ChatToolCall> out;
  for (size_t i = 0; i < list.as_array().size(); ++i) {
    const std::string pc = param + "[" + std::to_string(i) + "]";
    const Value& call = list.as_array()[i];
    if (!call.is_object()) throw wrong_type(pc, "an object", call);
    // "index" is what a streamed answer numbers its calls with; clients that
    // rebuild the message from chunks may keep it.
    only_keys(call, {"id", "type", "function", "index"}, pc);
    ChatToolCall c;
    c.id = required_string(call, "id", pc);
    if (const Value* type = field(call, "type");
        type != nullptr && !(type->is_string() && type->as_string() == "function"))
      throw invalid_request("'" + pc + ".type' must be \"function\"", pc + ".type", "invalid_value");
    const Value* function = field(call, "function");
    if (function == nullptr)
      throw invalid_request("'" + pc + ".function' is required", pc + ".function", "missing_required_parameter");
    const std::string pf = pc + ".function";
    if (!function->is_object()) throw wrong_type(pf, "an object", *function);
    only_keys(*function, {"name", "arguments"}, pf);
    c.name = required_string(*function, "name", pf);
    if (!valid_function_name(c.name))
      throw invalid_request(
          "'" + pf + ".name' must be 1 to 64 letters, digits, '_' or '-', got " + json::quoted(c.name), pf + ".name",
          "invalid_value");
    const Value* args = field(*function, "arguments");
    if (args == nullptr) {
      c.arguments = Value(json::Object{});
    } else if (args->is_object()) {
      c.arguments = *args;
    } else if (args->is_string()) {
      // OpenAI sends the arguments as JSON text; the tool format writes them
      // as an object, so the text must hold one.
      try {
        json::ParseOptions opt;
        opt.source = pf + ".arguments";
        opt.max_depth = 64;
        c.arguments = args->as_string().empty() ? Value(json::Object{}) : json::parse(args->as_string(), opt);
      } catch (const Error& e) {
        throw invalid_request("'" + pf + ".arguments' must hold a JSON object: " + e.what(), pf + ".arguments",
                              "invalid_value");
      }
      if (!c.arguments.is_object())
        throw invalid_request(
            "'" + pf + ".arguments' must hold a JSON object, got " + json::kind_name(c.arguments.kind()),
            pf + ".arguments", "invalid_value");
    } else {
      throw wrong_type(pf + ".arguments", "a string (a JSON object) or an object", *args);
    }
    out.push_back(std::move(c));
  }
  return out;
}

void check_tool_messages(const std::vector<ChatMessage>& messages) {
  const ChatMessage* caller = nullptr;  // the assistant message the current run of tool messages answers
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string pm = "messages[" + std::to_string(i) + "]";
    if (m.role != "tool") {
      caller = m.role == "assistant" && !m.tool_calls.empty() ? &m : nullptr;
      continue;
    }
    if (caller == nullptr)
      throw invalid_request("'" + pm +
                                "' is a tool message, but it does not follow an assistant message with tool_calls "
                                "(tool results answer the calls of the assistant message right before them)",
                            pm + ".role", "invalid_value");
    bool found = false;
    for (const ChatToolCall& c : caller->tool_calls) found = found || c.id == m.tool_call_id;
    if (!found)
      throw invalid_request("'" + pm + ".tool_call_id' = " + json::quoted(m.tool_call_id) +
                                " is not the id of a call in the assistant message before it",
                            pm + ".tool_call_id", "invalid_value");
  }
}

}  // namespace dgemma::server

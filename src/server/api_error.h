#pragma once
// An OpenAI-style API error: the HTTP status and the fields of the JSON body
// {"error": {"message", "type", "param", "code"}} every failed request gets.
#include <stdexcept>
#include <string>

namespace dgemma::server {

struct ApiError : std::runtime_error {
  int status;         // 400 invalid request, 404 unknown route/model, 413 body too large, 429 queue full, ...
  std::string type;   // "invalid_request_error", "not_found_error", "rate_limit_error", "server_error"
  std::string param;  // the offending request field ("" = null)
  std::string code;   // machine-readable reason ("" = null)

  ApiError(int status, std::string message, std::string type, std::string param = {}, std::string code = {})
      : std::runtime_error(std::move(message)),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
};

// 400 invalid_request_error naming `param`.
inline ApiError invalid_request(std::string message, std::string param = {}, std::string code = {}) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

// The JSON body of an error (compact, one line).
std::string error_body(const ApiError& error);
// The error type a bare status gets when no handler produced a body
// (e.g. 413 from the HTTP library's body limit).
ApiError error_for_status(int status, const std::string& method, const std::string& path);

// The error a connection gets when it is refused before its request is
// routed (http_listener.h): 400, 408, 413, 429, 431, 501 or 503, with the
// reader's message.
ApiError connection_error(int status, std::string message);

}  // namespace dgemma::server

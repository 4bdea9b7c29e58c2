#include "server/api_error.h"

#include "core/json.h"

namespace dgemma::server {

std::string error_body(const ApiError& error) {
  json::Object e;
  e.emplace_back("message", json::Value(std::string(error.what())));
  e.emplace_back("type", json::Value(error.type));
  e.emplace_back("param", error.param.empty() ? json::Value() : json::Value(error.param));
  e.emplace_back("code", error.code.empty() ? json::Value() : json::Value(error.code));
  json::Object root;
  root.emplace_back("error", json::Value(std::move(e)));
  return json::dump(json::Value(std::move(root)));
}

ApiError error_for_status(int status, const std::string& method, const std::string& path) {
  // The path comes from the client: keep the message short and valid UTF-8
  // (json::dump replaces invalid bytes).
  const std::string where = method.substr(0, 16) + " " + path.substr(0, 200);
  switch (status) {
    case 404: return ApiError(404, "unknown URL (" + where + ")", "invalid_request_error", "", "unknown_url");
    case 405:
      return ApiError(405, "method not allowed (" + where + ")", "invalid_request_error", "", "method_not_allowed");
    case 413:
      return ApiError(413, "the request body is too large (--max-body-size)", "invalid_request_error", "",
                      "request_too_large");
    case 414: return ApiError(414, "the request URI is too long", "invalid_request_error", "", "uri_too_long");
    case 429: return ApiError(429, "too many requests", "rate_limit_error", "", "queue_full");
    case 503: return ApiError(503, "the server is shutting down", "server_error", "", "unavailable");
    default: break;
  }
  if (status >= 500) return ApiError(status, "internal server error", "server_error", "", "internal_error");
  return ApiError(status, "malformed HTTP request", "invalid_request_error", "", "bad_request");
}

ApiError connection_error(int status, std::string message) {
  switch (status) {
    case 408: return ApiError(408, std::move(message), "invalid_request_error", "", "request_timeout");
    case 413: return ApiError(413, std::move(message), "invalid_request_error", "", "request_too_large");
    case 429: return ApiError(429, std::move(message), "rate_limit_error", "", "too_many_connections");
    case 431: return ApiError(431, std::move(message), "invalid_request_error", "", "headers_too_large");
    case 501: return ApiError(501, std::move(message), "invalid_request_error", "", "not_implemented");
    case 503: return ApiError(503, std::move(message), "server_error", "", "too_many_connections");
    default: return ApiError(status, std::move(message), "invalid_request_error", "", "bad_request");
  }
}

}  // namespace dgemma::server

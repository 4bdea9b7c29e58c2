#pragma once
// The HTTP binding (cpp-httplib) of the utility routes, as llama.cpp's server
// has them (utility_api.h builds their JSON):
//   POST /tokenize, POST /detokenize, GET /props,
//   GET /v1/models, GET /v1/models/{id}   (with the context length)
// Register them before the completion routes: the library answers a path with
// the first route that matches, so these model routes are the ones served.
// Errors are the JSON bodies of the completion routes (api_error.h): 413 for
// a body over the limit, 400 for bad JSON or wrong types, 404 for another
// model id, 405 for a wrong method, 401 from the auth check.
// Only the files built with cpp-httplib's flags include this header
// (CMakeLists.txt: DGEMMA_HTTP_SOURCES).
#include <httplib.h>

#include <cstdint>
#include <functional>

#include "server/service.h"

namespace dgemma::server {

struct UtilityRouteOptions {
  int64_t max_body_bytes = 1 << 20;  // larger bodies get 413
  int64_t created = 0;               // unix seconds the model cards report
  // The server's --api-key check: true to go on; false when it has set the
  // 401 answer. Empty: every request is allowed.
  std::function<bool(const httplib::Request&, httplib::Response&)> authorized;
};

// Adds the routes to `server`; `service` must outlive it.
void add_utility_routes(httplib::Server& server, CompletionService& service, UtilityRouteOptions options);

}  // namespace dgemma::server

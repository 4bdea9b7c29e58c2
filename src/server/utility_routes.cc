#include "server/utility_routes.h"

#include <httplib.h>

#include <string>
#include <utility>

#include "server/api_error.h"
#include "server/utility_api.h"

namespace dgemma::server {
namespace {

void answer_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

}  // namespace

void add_utility_routes(httplib::Server& server, CompletionService& service, UtilityRouteOptions options) {
  auto shared = std::make_shared<UtilityRouteOptions>(std::move(options));
  // Runs `answer` (which returns the JSON body) after the auth check, with
  // ApiErrors as JSON error bodies.
  auto route = [shared](auto answer) {
    return [shared, answer](const httplib::Request& req, httplib::Response& res) {
      if (shared->authorized && !shared->authorized(req, res)) return;
      try {
        res.set_content(answer(req), "application/json");
      } catch (const ApiError& e) {
        answer_error(res, e);
      }
    };
  };
  // POST routes: the body limit first, as on the completion routes.
  auto post_route = [shared, route](auto answer) {
    return route([shared, answer](const httplib::Request& req) {
      if (int64_t(req.body.size()) > shared->max_body_bytes) throw error_for_status(413, req.method, req.path);
      return answer(req);
    });
  };
  auto wrong_method = [route](const char* allow) {
    return [route, allow](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allow);
      route([](const httplib::Request& r) -> std::string { throw error_for_status(405, r.method, r.path); })(req, res);
    };
  };

  server.Post("/tokenize", post_route([&service](const httplib::Request& req) {
                return tokenize_body(service.tokenizer(), parse_tokenize_request(req.body));
              }));
  server.Post("/detokenize", post_route([&service](const httplib::Request& req) {
                // The tokenizer's ids (it may hold added tokens beyond the model's rows).
                const int64_t vocab = int64_t(service.tokenizer().vocab_size());
                return detokenize_body(service.tokenizer(), parse_detokenize_request(req.body, vocab));
              }));
  server.Get("/props", route([&service, shared](const httplib::Request&) {
               return props_body(served_model(service, shared->created), service.options());
             }));
  server.Get("/v1/models", route([&service, shared](const httplib::Request&) {
               return model_list_body(served_model(service, shared->created));
             }));
  server.Get(R"(/v1/models/(.+))", route([&service, shared](const httplib::Request& req) {
               const std::string id = req.matches[1];
               if (id != service.options().model_name)
                 throw ApiError(404, "the model '" + id + "' does not exist", "invalid_request_error", "model",
                                "model_not_found");
               return model_card_body(served_model(service, shared->created));
             }));
  for (const char* path : {"/tokenize", "/detokenize"}) server.Get(path, wrong_method("POST"));
  server.Post("/props", wrong_method("GET"));
}

}  // namespace dgemma::server

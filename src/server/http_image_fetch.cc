// fetch_remote_image (server/request_images.h): only with --allow-remote-images
// (docs/server.md §8.2).
#include <httplib.h>

#include <string>
#include <vector>

#include "dgemma/error.h"
#include "server/request_images.h"

namespace dgemma::server {

std::vector<uint8_t> fetch_remote_image(const std::string& url, uint64_t max_bytes, int timeout_seconds) {
  // scheme://host[:port]/path: httplib's client takes the first part, Get the path.
  const size_t scheme_end = url.find("://");
  const size_t path_start = scheme_end == std::string::npos ? std::string::npos : url.find('/', scheme_end + 3);
  const std::string origin = url.substr(0, path_start);
  const std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  if (scheme_end == std::string::npos || origin.size() <= scheme_end + 3) throw Error("malformed URL " + url);
  httplib::Client client(origin);
  if (!client.is_valid()) throw Error("cannot fetch " + url + ": unsupported URL");
  client.set_connection_timeout(timeout_seconds, 0);
  client.set_read_timeout(timeout_seconds, 0);
  client.set_write_timeout(timeout_seconds, 0);
  client.set_follow_location(false);  // a redirect is an error, not a second fetch
  std::vector<uint8_t> body;
  bool too_large = false;
  const httplib::Result res = client.Get(path, [&](const char* data, size_t n) {
    if (body.size() + n > max_bytes) {
      too_large = true;
      return false;  // stop reading
    }
    body.insert(body.end(), data, data + n);
    return true;
  });
  if (too_large) throw Error("the image at " + url + " is larger than " + std::to_string(max_bytes) + " bytes");
  if (!res) throw Error("cannot fetch " + url + ": " + httplib::to_string(res.error()));
  if (res->status != 200) throw Error("fetching " + url + " answered HTTP " + std::to_string(res->status));
  return body;
}

}  // namespace dgemma::server

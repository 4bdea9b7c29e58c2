#pragma once
// The one exception type of the library. Messages name the file, tensor, field
// and offending value so that a user can act on them without a debugger.
#include <stdexcept>
#include <string>

namespace dgemma {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace dgemma

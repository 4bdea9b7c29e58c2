#pragma once
// Force-included into every test (see CMakeLists.txt): the test data folder
// is found at run time (ctest sets DGEMMA_TEST_DATA; otherwise it is located
// from the source tree) so that test objects do not embed the checkout path.
#include <cstdlib>
#include <string>

#include "support/source_dir.h"

inline std::string dgemma_test_data_dir() {
  if (const char* env = std::getenv("DGEMMA_TEST_DATA"); env && *env) return env;
  return dgemma::source_dir() + "/tests/data";
}
#define DGEMMA_TEST_DATA (dgemma_test_data_dir())

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

// A fresh, empty scratch folder for this test process: temp/dgemma_<tag>_<pid>.
// ctest runs every test case in its own process, several at once, so a fixed
// folder name would be shared (and raced on) by concurrent tests. The folders
// are removed when the process exits.
inline std::string dgemma_test_temp_dir(const std::string& tag) {
  struct Registry {
    std::mutex mu;
    std::vector<std::filesystem::path> dirs;
    ~Registry() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Registry registry;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dgemma_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.dirs.push_back(dir);
  return dir.string();
}

namespace dgemma::test {

// A fresh scratch folder (mkdtemp under the temp directory), removed with
// everything in it when the object goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dgemma_test_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace dgemma::test

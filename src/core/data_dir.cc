#include "core/data_dir.h"

#include <cstdlib>
#include <filesystem>

#include "dgemma/error.h"

namespace dgemma {

std::vector<std::string> data_dirs() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("DGEMMA_DATA_DIR"); env != nullptr && *env != '\0') return {env};
  std::vector<std::string> dirs;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path bin = exe.parent_path();
    dirs.push_back((bin.parent_path() / "share" / "dgemma").string());
    dirs.push_back((bin / "share" / "dgemma").string());
  }
  return dirs;
}

std::string data_file(const std::string& name) {
  namespace fs = std::filesystem;
  const std::vector<std::string> dirs = data_dirs();
  std::string looked;
  for (const std::string& d : dirs) {
    std::error_code ec;
    const fs::path p = fs::path(d) / name;
    if (fs::is_regular_file(p, ec)) return p.string();
    looked += (looked.empty() ? "" : ", ") + d;
  }
  throw Error("dgemma's data file " + name + " was not found (looked in " + (looked.empty() ? "nothing" : looked) +
              "): install dgemma with `cmake --install BUILD --prefix P` and run P/bin/dgemma, or set "
              "DGEMMA_DATA_DIR to a folder holding " +
              name);
}

}  // namespace dgemma

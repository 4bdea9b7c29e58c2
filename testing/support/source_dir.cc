#include "support/source_dir.h"

#include <cstdlib>
#include <filesystem>

namespace dgemma {

const char* built_source_dir();  // generated: build/<flavour>/generated/source_dir.cc

std::string source_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("DGEMMA_SOURCE_DIR"); env && *env) return env;
  std::error_code ec;
  const fs::path built = built_source_dir();
  if (fs::exists(built / "tests" / "data", ec)) return built.string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
      if (fs::exists(p / "tests" / "data", ec) && fs::exists(p / "CMakeLists.txt", ec)) return p.string();
  }
  return built.string();
}

}  // namespace dgemma

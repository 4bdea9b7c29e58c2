#pragma once
// Reads one golden case (tests/data/golden_a/cases/<name>.{json,safetensors};
// layout in docs/reference-data.md) for the generate tests.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma::testing {

inline std::string golden_a_dir() { return std::string(DGEMMA_TEST_DATA) + "/golden_a"; }
inline std::string golden_v_dir() { return std::string(DGEMMA_TEST_DATA) + "/golden_v"; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class GoldenCase {
 public:
  // A case of the golden folder `dir` (golden A by default).
  explicit GoldenCase(const std::string& name, const std::string& dir = golden_a_dir())
      : name_(name),
        tensors_path_(dir + "/cases/" + name + ".safetensors"),
        file_(SafetensorsFile::open(tensors_path_)) {
    json::ParseOptions options;
    options.source = name + ".json";
    meta_ = json::parse(read_file(dir + "/cases/" + name + ".json"), options);
  }

  const std::string& name() const { return name_; }
  const std::string& tensors_path() const { return tensors_path_; }
  const json::Value& meta() const { return meta_; }
  bool has(const std::string& tensor) const { return file_->find(tensor) != nullptr; }

  // I64 / I32 / BOOL tensors as int64.
  std::vector<int64_t> ints(const std::string& tensor) const {
    const TensorView v = view(tensor);
    std::vector<int64_t> out(size_t(v.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      switch (v.dtype()) {
        case DType::kI64: std::memcpy(&out[i], v.data + 8 * i, 8); break;
        case DType::kI32: {
          int32_t x;
          std::memcpy(&x, v.data + 4 * i, 4);
          out[i] = x;
          break;
        }
        case DType::kBool: out[i] = v.data[i] != 0; break;
        default: throw Error(name_ + ": " + tensor + " is not an integer tensor");
      }
    }
    return out;
  }
  std::vector<int32_t> ints32(const std::string& tensor) const {
    const std::vector<int64_t> v = ints(tensor);
    return std::vector<int32_t>(v.begin(), v.end());
  }
  std::vector<float> floats(const std::string& tensor) const {
    const TensorView v = view(tensor);
    if (v.dtype() != DType::kF32) throw Error(name_ + ": " + tensor + " is not F32");
    std::vector<float> out(size_t(v.numel()));
    std::memcpy(out.data(), v.data, out.size() * sizeof(float));
    return out;
  }

 private:
  TensorView view(const std::string& tensor) const {
    const TensorInfo* info = file_->find(tensor);
    if (info == nullptr) throw Error(name_ + ": no tensor " + tensor);
    return file_->view(*info);
  }

  std::string name_;
  std::string tensors_path_;
  std::shared_ptr<const SafetensorsFile> file_;
  json::Value meta_;
};

}  // namespace dgemma::testing

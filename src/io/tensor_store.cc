// A checkpoint folder as one name -> tensor map: a sharded checkpoint through
// `model.safetensors.index.json` (docs/formats.md §1.6), else every
// `*.safetensors` file in the folder; or a GGUF model (docs/formats.md §5.1).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"

namespace dgemma {
namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string parent_dir(const std::string& path) {
  std::filesystem::path p(path);
  std::string parent = p.parent_path().string();
  return parent.empty() ? "." : parent;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// §1.6: a shard must be a plain file name inside the model folder, so that an
// index cannot make us open files elsewhere.
void check_shard_name(const std::string& index, const std::string& tensor, const std::string& shard) {
  std::string why;
  if (shard.empty())
    why = "is empty";
  else if (shard.find('/') != std::string::npos)
    why = "contains '/' (must be a plain file name)";
  else if (shard.find('\\') != std::string::npos)
    why = "contains '\\' (must be a plain file name)";
  else if (shard.find("..") != std::string::npos)
    why = "contains '..' (must be a plain file name)";
  else if (shard == ".")
    why = "is not a file name";
  else if (shard.find('\0') != std::string::npos)
    why = "contains a NUL byte";
  if (!why.empty()) {
    throw Error(index + ": shard name " + json::quoted(shard) + " for tensor " + json::quoted(tensor) + " " + why);
  }
}

}  // namespace

TensorStore TensorStore::open_file(const std::string& path) {
  TensorStore store;
  store.dir_ = parent_dir(path);
  auto file = SafetensorsFile::open(path);
  for (const TensorInfo& t : file->tensors()) store.views_.emplace(t.name, file->view(t));
  store.files_.push_back(std::move(file));
  for (const auto& kv : store.views_) store.names_.push_back(kv.first);
  return store;
}

TensorStore TensorStore::open_dir(const std::string& dir) {
  TensorStore store;
  store.dir_ = dir;
  const std::string index_path = join_path(dir, kIndexName);

  if (!is_regular_file(index_path)) {
    // No index: every *.safetensors file of the folder, in name order.
    std::vector<std::string> paths;
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) throw Error("cannot list checkpoint folder " + dir + ": " + ec.message());
    for (const auto& entry : it) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 12 && name.ends_with(".safetensors") && is_regular_file(entry.path().string()))
        paths.push_back(join_path(dir, name));
    }
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) throw Error(dir + ": no " + std::string(kIndexName) + " and no *.safetensors files");
    for (const auto& path : paths) {
      auto file = SafetensorsFile::open(path);
      for (const TensorInfo& t : file->tensors()) {
        auto [pos, inserted] = store.views_.emplace(t.name, file->view(t));
        if (!inserted) {
          throw Error(dir + ": tensor " + json::quoted(t.name) + " is in both " + std::string(pos->second.file) +
                      " and " + path);
        }
      }
      store.files_.push_back(std::move(file));
    }
    for (const auto& kv : store.views_) store.names_.push_back(kv.first);
    return store;
  }

  // Sharded checkpoint (§1.6). `metadata` is informational and not checked.
  json::ParseOptions opt;
  opt.source = index_path;
  const json::Value root = json::parse(read_text_file(index_path), opt);
  if (!root.is_object())
    throw Error(index_path + ": top level is " + json::kind_name(root.kind()) + ", expected an object");
  const json::Value* weight_map = root.find("weight_map");
  if (!weight_map) throw Error(index_path + ": missing \"weight_map\"");
  if (!weight_map->is_object())
    throw Error(index_path + ": weight_map is " + json::kind_name(weight_map->kind()) + ", expected an object");
  if (weight_map->as_object().empty()) throw Error(index_path + ": weight_map is empty (no shards)");

  std::map<std::string, std::string, std::less<>> shard_of;  // tensor -> shard
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : weight_map->as_object()) {
    if (!shard.is_string()) {
      throw Error(index_path + ": weight_map entry for tensor " + json::quoted(tensor) + " is " +
                  json::kind_name(shard.kind()) + ", expected a shard file name");
    }
    check_shard_name(index_path, tensor, shard.as_string());
    shard_of.emplace(tensor, shard.as_string());
    shard_names.insert(shard.as_string());
  }

  std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
  for (const auto& shard : shard_names) {
    const std::string path = join_path(dir, shard);
    if (!is_regular_file(path))
      throw Error(index_path + ": shard " + json::quoted(shard) + " does not exist (" + path + ")");
    shards.emplace(shard, SafetensorsFile::open(path));
  }

  // Every tensor stored in a shard must be indexed, and indexed to that shard.
  for (const auto& [shard, file] : shards) {
    for (const TensorInfo& t : file->tensors()) {
      auto [pos, inserted] = store.views_.emplace(t.name, file->view(t));
      if (!inserted) {
        throw Error(index_path + ": tensor " + json::quoted(t.name) + " is stored in two shards: " +
                    json::quoted(std::filesystem::path(std::string(pos->second.file)).filename().string()) + " and " +
                    json::quoted(shard));
      }
      if (!shard_of.count(t.name)) {
        throw Error(index_path + ": tensor " + json::quoted(t.name) + " in shard " + json::quoted(shard) +
                    " is missing from the index weight_map");
      }
    }
  }
  for (const auto& [tensor, shard] : shard_of) {
    if (!shards.at(shard)->find(tensor)) {
      throw Error(index_path + ": weight_map maps tensor " + json::quoted(tensor) + " to shard " + json::quoted(shard) +
                  ", which does not contain it");
    }
  }
  for (auto& kv : shards) store.files_.push_back(std::move(kv.second));
  for (const auto& kv : store.views_) store.names_.push_back(kv.first);
  return store;
}

const TensorView* TensorStore::find(std::string_view name) const {
  auto it = views_.find(name);
  return it == views_.end() ? nullptr : &it->second;
}

// ---- GGUF (docs/formats.md §5.1) ---------------------------------------------

TensorStore TensorStore::open_gguf(const GgufModelFiles& files,
                                   const std::function<std::string(std::string_view)>& rename) {
  TensorStore store;
  store.dir_ = parent_dir(files.path());
  auto infos = std::make_shared<std::vector<TensorInfo>>();
  size_t total = 0;
  for (const auto& part : files.parts()) total += part->header().tensors.size();
  infos->reserve(total);                                        // the views below point into it: no reallocation
  std::map<std::string, std::string, std::less<>> source_name;  // dgemma name -> GGUF name
  for (const auto& part : files.parts()) {
    const GgufHeader& h = part->header();
    for (const GgufTensorInfo& t : h.tensors) {
      TensorInfo info;
      info.name = rename ? rename(t.name) : std::string();
      if (info.name.empty()) info.name = t.name;
      auto [pos, inserted] = source_name.emplace(info.name, t.name);
      if (!inserted) {
        throw Error(files.path() + ": tensors " + gguf_quoted(pos->second) + " and " + gguf_quoted(t.name) +
                    " both map to the name " + json::quoted(info.name));
      }
      switch (t.type) {
        case GgmlType::kF32: info.dtype = DType::kF32; break;
        case GgmlType::kF16: info.dtype = DType::kF16; break;
        case GgmlType::kBF16: info.dtype = DType::kBF16; break;
        default: info.dtype = DType::kF32; info.ggml_blocks = t.type;
      }
      info.shape.assign(t.ne.rbegin(), t.ne.rend());
      info.begin = h.data_offset + t.offset;
      info.end = info.begin + t.nbytes;
      infos->push_back(std::move(info));
      TensorView view;
      view.info = &infos->back();
      view.data = part->data(t);
      view.file = part->path();
      store.views_.emplace(infos->back().name, view);
    }
    store.gguf_parts_.push_back(part);
  }
  store.gguf_infos_ = std::move(infos);
  for (const auto& kv : store.views_) store.names_.push_back(kv.first);
  return store;
}

}  // namespace dgemma

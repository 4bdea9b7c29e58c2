#pragma once
// Checkpoint inspection (`dgemma inspect`): architecture summary, parameter
// counts and bytes by component and dtype (tied storage counted once), tie
// groups, skipped tensors and a memory estimate — from the mapped files,
// without reading weight data.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "checkpoint/config.h"

namespace dgemma {

struct CheckpointReport {
  ModelConfig config;
  std::string dir;
  int64_t parameters_total = 0;
  std::map<std::string, int64_t> parameters_by_component;
  std::map<std::string, uint64_t> bytes_by_component;
  std::map<std::string, uint64_t> bytes_by_dtype;
  uint64_t weight_bytes = 0;
  std::vector<std::vector<std::string>> tie_groups;  // canonical first, then aliases (stored or implied)
  std::vector<std::string> aliases_stored;           // alias names physically present in the files
  std::vector<std::string> skipped_tensors;
  uint64_t skipped_bytes = 0;
  int64_t context = 0;
  uint64_t kv_cache_bytes = 0;   // fp32 cache at `context` committed positions
  uint64_t workspace_bytes = 0;  // per-canvas buffers (logits, self-conditioning, activations)
  size_t files = 0;
  std::string file_format = "safetensors";  // or "GGUF"
  size_t stored_tensors = 0;                // tensors in the files (GGUF: rope_freqs included)
};

CheckpointReport inspect_checkpoint(const std::string& dir, int64_t context);

// KV-cache bytes of the engine's fp32 cache after `context` committed
// positions (sliding layers keep W-1, docs/model.md §2.2).
uint64_t kv_cache_bytes(const ModelConfig& config, int64_t context);

json::Value report_to_json(const CheckpointReport& r);
std::string report_to_text(const CheckpointReport& r);

}  // namespace dgemma

#include "placement/planner.h"

#include "core/format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace dgemma {
namespace {

// Layer index of a per-layer tensor name ("...layers.7.mlp..." -> 7), else -1.
int layer_of(const std::string& name) {
  const size_t p = name.find("layers.");
  if (p == std::string::npos) return -1;
  int v = -1;
  const char* b = name.data() + p + 7;
  std::from_chars(b, name.data() + name.size(), v);
  return v;
}

struct Unit {
  uint64_t weights = 0, kv = 0;
};

struct Sizes {
  Unit global;               // embedding table, final norm, self-conditioning
  std::vector<Unit> layers;  // one per layer pair
  uint64_t embed_table = 0;
  uint64_t layer_workspace = 0;   // transient buffers of one pass on a layer device
  uint64_t head_workspace = 0;    // logits / sampler / self-conditioning on the head device
  uint64_t hidden_handoff = 0;    // one hand-off of hidden states
  uint64_t vision_weights = 0;    // in global.weights too
  uint64_t vision_workspace = 0;  // one image through the tower, on the head device
  int64_t vision_patches = 0;
};

// Transient fp32 buffers of one image of n patches through the vision tower
// (docs/model.md §7.2-§7.5): the patch rows, per layer the residual, norms,
// projections, q/k/v before and after their norms and RoPE, the attention
// output, the MLP's gate, up and product, and the attention scores over
// every pair of patches (bidirectional, no mask), as the text passes count
// them.
uint64_t vision_activation_bytes(const VisionConfig& v, int64_t n_patches) {
  const uint64_t n = uint64_t(n_patches), H = uint64_t(v.hidden_size), d = uint64_t(v.head_dim);
  const uint64_t q = uint64_t(v.num_heads) * d, kv = uint64_t(v.num_kv_heads > 0 ? v.num_kv_heads : v.num_heads) * d;
  const uint64_t F = uint64_t(v.intermediate_size), patch = 3 * uint64_t(v.patch_size) * uint64_t(v.patch_size);
  const uint64_t per_row = 2 * patch + 8 * H + 3 * (q + 2 * kv) + 3 * F;
  const uint64_t scores = uint64_t(v.num_heads) * n;
  return n * (per_row + scores) * 4;
}

// Every tensor the model binds: the text model's, then the vision tower's,
// which runs before the encoder's first layer and goes with the embedding
// (docs/model.md §7.1).
std::vector<ExpectedTensor> placed_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> all = expected_tensors(c);
  for (ExpectedTensor& t : expected_vision_tensors(c)) all.push_back(std::move(t));
  return all;
}

// The text layer a tensor belongs to, -1 for the global ones (the vision
// tower's own layers included).
int layer_of_tensor(const ExpectedTensor& t) {
  if (t.component == Component::kVisionLinear || t.component == Component::kVisionTable) return -1;
  return layer_of(t.name);
}

Sizes measure(const ModelConfig& c, const std::map<std::string, uint64_t>& bytes, const PlanRequest& r) {
  Sizes s;
  s.layers.resize(size_t(c.num_layers));
  for (const ExpectedTensor& t : placed_tensors(c)) {
    uint64_t b;
    if (auto it = bytes.find(t.name); it != bytes.end()) {
      b = it->second;
    } else {
      b = 2;  // bf16 when the checkpoint does not say
      for (int64_t d : t.shape) b *= uint64_t(d);
    }
    const int li = layer_of_tensor(t);
    if (li >= 0)
      s.layers[size_t(li)].weights += b;
    else
      s.global.weights += b;
    if (t.component == Component::kEmbedding) s.embed_table = b;
    if (t.component == Component::kVisionLinear || t.component == Component::kVisionTable) s.vision_weights += b;
  }
  if (c.vision_tower && c.vision.complete()) {
    s.vision_patches = r.vision_max_soft_tokens * c.vision.pooling_kernel_size * c.vision.pooling_kernel_size;
    s.vision_workspace = vision_activation_bytes(c.vision, s.vision_patches);
  }
  const uint64_t B = uint64_t(r.max_batch), L = uint64_t(c.canvas_length), H = uint64_t(c.hidden_size);
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerSpec& ls = c.layer(i);
    const uint64_t rows = ls.type == LayerType::kSliding
                              ? uint64_t(std::min<int64_t>(r.max_context, c.sliding_window - 1))
                              : uint64_t(r.max_context);
    s.layers[size_t(i)].kv =
        2 * B * rows * uint64_t(ls.num_kv_heads) * uint64_t(ls.head_dim) * uint64_t(r.kv_bytes_per_element);
  }
  // One pass over a canvas (prefill is chunked to canvas-sized pieces): fp32
  // activations of the widest layer, attention scores over context + canvas,
  // and MoE dispatch at capacity = canvas length x top-k (no dropped routes).
  uint64_t widest = 0, scores = 0;
  for (const LayerSpec& ls : c.layers) {
    const uint64_t q = uint64_t(c.num_heads) * uint64_t(ls.head_dim),
                   kv = uint64_t(ls.num_kv_heads) * uint64_t(ls.head_dim);
    widest = std::max(widest, 8 * H + 2 * q + 2 * kv + 3 * uint64_t(c.intermediate_size) +
                                  uint64_t(c.top_k_experts) * (2 * uint64_t(c.moe_intermediate_size) + H));
    scores = std::max(scores, uint64_t(c.num_heads) * (uint64_t(r.max_context) + L));
  }
  s.layer_workspace = B * L * (widest + scores) * 4;
  // Logits, tempered logits and self-conditioning input [B, L, V] fp32, plus
  // the soft embedding [B, L, H].
  s.head_workspace = 3 * B * L * uint64_t(c.vocab_size) * 4 + B * L * H * 4;
  s.hidden_handoff = B * L * H * 4;
  return s;
}

struct Assignment {
  std::vector<int> first, last;  // per device, -1 when empty
  bool ok = false;
};

// Device load for a candidate layer range.
uint64_t load_of(const Sizes& s, int first, int last, bool head, bool replica, const PlanRequest& r) {
  uint64_t w = 0, kv = 0;
  for (int i = first; i >= 0 && i <= last; ++i) {
    w += s.layers[size_t(i)].weights;
    kv += s.layers[size_t(i)].kv;
  }
  uint64_t ws = first >= 0 ? s.layer_workspace : 0;
  if (head) {
    w += s.global.weights;
    ws = std::max({ws, s.head_workspace, s.vision_workspace});
  }
  if (replica) {
    w += s.embed_table;
    ws = std::max(ws, s.head_workspace);
  }
  return w + kv + ws + r.margin_bytes;
}

// Greedy contiguous fill with per-device limits; the head unit sits on
// device 0. Returns per-device layer ranges, or ok = false.
Assignment fill(const Sizes& s, const std::vector<uint64_t>& limit, const PlanRequest& r) {
  const int n = int(s.layers.size()), D = int(limit.size());
  Assignment a;
  a.first.assign(size_t(D), -1);
  a.last.assign(size_t(D), -1);
  int next = 0;
  for (int d = 0; d < D && next < n; ++d) {
    int last = next - 1;
    while (last + 1 < n) {
      const bool would_be_last = last + 1 == n - 1;
      const bool replica = r.replicate_embedding && would_be_last && d > 0;
      if (load_of(s, next, last + 1, d == 0, replica, r) > limit[size_t(d)]) break;
      ++last;
    }
    if (last < next) {
      if (d == 0 && load_of(s, -1, -2, true, false, r) > limit[0]) return a;  // head alone does not fit
      continue;                                                               // this device takes nothing; try the next
    }
    a.first[size_t(d)] = next;
    a.last[size_t(d)] = last;
    next = last + 1;
  }
  if (next < n) return a;
  if (a.first[0] < 0 && load_of(s, -1, -2, true, false, r) > limit[0]) return a;
  a.ok = true;
  return a;
}

uint64_t usable(uint64_t capacity, double utilization) { return uint64_t(double(capacity) * utilization); }

// Smallest equal per-device capacity at which `fill` succeeds on D devices.
uint64_t min_capacity(const Sizes& s, int D, const PlanRequest& r) {
  uint64_t lo = 1, hi = uint64_t(1) << 52;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    std::vector<uint64_t> lim(size_t(D), usable(mid, r.utilization));
    if (fill(s, lim, r).ok)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Human-readable binary size: GiB for large sizes, MiB/KiB below (a small
// model must not show as "0.00 GiB").
std::string gib(uint64_t b) {
  char buf[64];
  const double x = double(b);
  if (b >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", x / double(uint64_t(1) << 30));
  else if (b >= (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", x / double(uint64_t(1) << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.2f KiB", x / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
  return buf;
}

}  // namespace

PlanStrategy parse_strategy(const std::string& name) {
  if (name == "single") return PlanStrategy::kSingle;
  if (name == "sequential") return PlanStrategy::kSequential;
  if (name == "balanced") return PlanStrategy::kBalanced;
  throw Error("unknown placement strategy '" + name + "' (expected single, sequential or balanced)");
}

uint64_t parse_bytes(const std::string& text) {
  double v = 0;
  const char* b = text.data();
  const char* e = text.data() + text.size();
  auto r = std::from_chars(b, e, v);
  if (r.ec != std::errc() || v < 0) throw Error("invalid byte size '" + text + "' (e.g. 80GiB, 24G, 512MiB, 1.5TB)");
  // Units are case-insensitive; a bare K/M/G/T (as in `docker --memory` or
  // llama.cpp) is binary like KiB/MiB/GiB/TiB; KB/MB/GB/TB are decimal.
  std::string unit;
  for (const char* p = r.ptr; p < e; ++p)
    if (*p != ' ') unit += char(std::tolower(static_cast<unsigned char>(*p)));
  double mul = 1;
  if (unit.empty() || unit == "b")
    mul = 1;
  else if (unit == "kib" || unit == "k")
    mul = 1024.0;
  else if (unit == "mib" || unit == "m")
    mul = 1024.0 * 1024;
  else if (unit == "gib" || unit == "g")
    mul = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "t")
    mul = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    mul = 1e3;
  else if (unit == "mb")
    mul = 1e6;
  else if (unit == "gb")
    mul = 1e9;
  else if (unit == "tb")
    mul = 1e12;
  else
    throw Error("invalid byte unit '" + std::string(r.ptr, e) + "' in '" + text +
                "' (B, K/KiB, M/MiB, G/GiB, T/TiB binary; KB, MB, GB, TB decimal)");
  const double bytes = v * mul;
  if (bytes > 1.8e19) throw Error("byte size '" + text + "' is too large");
  return uint64_t(bytes);
}

std::vector<DeviceSpec> parse_device_list(const std::string& text,
                                          const std::function<uint64_t(const std::string&)>& capacity_of) {
  std::vector<DeviceSpec> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == 0 || item.empty() || (eq == std::string::npos && !capacity_of))
      throw Error("device '" + item + "': expected NAME=SIZE, e.g. cuda:0=80GiB");
    DeviceSpec d;
    d.name = item.substr(0, eq);
    // Without a size: the device's own memory.
    d.capacity_bytes = eq == std::string::npos ? capacity_of(d.name) : parse_bytes(item.substr(eq + 1));
    for (const auto& o : out)
      if (o.name == d.name) throw Error("device '" + d.name + "' is listed twice");
    out.push_back(d);
  }
  if (out.empty()) throw Error("no devices given (e.g. --devices cuda:0=80GiB,cuda:1=80GiB)");
  return out;
}

Plan make_plan(const ModelConfig& c, const std::map<std::string, uint64_t>& bytes, const PlanRequest& r) {
  if (r.devices.empty()) throw Error("plan: no devices");
  if (!(r.utilization > 0 && r.utilization <= 1)) throw Error("plan: utilization must be in (0, 1]");
  if (r.max_batch < 1 || r.max_context < 1) throw Error("plan: max batch and context must be >= 1");
  const Sizes s = measure(c, bytes, r);
  const int D = int(r.devices.size());
  std::vector<uint64_t> limit;
  for (const auto& d : r.devices) limit.push_back(usable(d.capacity_bytes, r.utilization));

  Assignment a;
  // Prefer one device when the whole model fits on the first (§2.3 item 7),
  // for every strategy; "single" allows nothing else.
  {
    std::vector<uint64_t> one = {limit[0]};
    Assignment single = fill(s, one, r);
    if (single.ok) {
      a = single;
      a.first.resize(size_t(D), -1);
      a.last.resize(size_t(D), -1);
    }
  }
  if (!a.ok && r.strategy == PlanStrategy::kSingle) {
    const uint64_t need = min_capacity(s, 1, r);
    throw PlanError("the model needs " + gib(need) + " on one device (weights, KV cache, workspace and the " +
                        gib(r.margin_bytes) + " margin, at " + std::to_string(int(r.utilization * 100)) +
                        "% utilization); " + r.devices[0].name + " has " + gib(r.devices[0].capacity_bytes),
                    need);
  }
  if (!a.ok && r.strategy == PlanStrategy::kSequential) a = fill(s, limit, r);
  if (!a.ok && r.strategy == PlanStrategy::kBalanced) {
    // Smallest fraction t of every device's usable memory at which the
    // greedy contiguous fill succeeds: spreads the layers evenly by load.
    double lo = 0.0, hi = 1.0;
    Assignment best = fill(s, limit, r);
    if (best.ok) {
      for (int it = 0; it < 40; ++it) {
        const double mid = 0.5 * (lo + hi);
        std::vector<uint64_t> lim;
        for (uint64_t l : limit) lim.push_back(uint64_t(double(l) * mid));
        Assignment t = fill(s, lim, r);
        if (t.ok) {
          hi = mid;
          best = t;
        } else {
          lo = mid;
        }
      }
    }
    a = best;
  }
  if (!a.ok) {
    const uint64_t need = min_capacity(s, D, r);
    throw PlanError("the model does not fit on " + std::to_string(D) +
                        " device(s) with this strategy: it needs at least " + gib(need) +
                        " per device (weights, KV cache for batch " + std::to_string(r.max_batch) + " x context " +
                        std::to_string(r.max_context) + ", workspace and the " + gib(r.margin_bytes) + " margin, at " +
                        std::to_string(int(r.utilization * 100)) + "% utilization); nothing is offloaded silently",
                    need);
  }

  Plan plan;
  int last_dev = 0;
  for (int d = 0; d < D; ++d)
    if (a.first[size_t(d)] >= 0) last_dev = d;
  const bool replica = r.replicate_embedding && last_dev > 0;
  for (int d = 0; d < D; ++d) {
    if (d > 0 && a.first[size_t(d)] < 0) continue;
    DevicePlan dp;
    dp.name = r.devices[size_t(d)].name;
    dp.capacity_bytes = r.devices[size_t(d)].capacity_bytes;
    dp.first_layer = a.first[size_t(d)];
    dp.last_layer = a.last[size_t(d)];
    dp.holds_embedding = d == 0;
    dp.holds_replica = replica && d == last_dev;
    for (int i = dp.first_layer; i >= 0 && i <= dp.last_layer; ++i) {
      dp.weights_bytes += s.layers[size_t(i)].weights;
      dp.kv_bytes += s.layers[size_t(i)].kv;
    }
    dp.workspace_bytes = dp.first_layer >= 0 ? s.layer_workspace : 0;
    if (dp.holds_embedding) {
      dp.weights_bytes += s.global.weights;
      dp.workspace_bytes = std::max({dp.workspace_bytes, s.head_workspace, s.vision_workspace});
      if (s.vision_patches > 0)
        plan.vision = VisionPlacement{dp.name, s.vision_weights, s.vision_workspace, s.vision_patches};
    }
    if (dp.holds_replica) {
      dp.weights_bytes += s.embed_table;
      dp.workspace_bytes = std::max(dp.workspace_bytes, s.head_workspace);
    }
    dp.margin_bytes = r.margin_bytes;
    plan.devices.push_back(dp);
  }
  // Tensor -> device for every canonical and alias name; tie groups.
  auto device_of_layer = [&](int li) {
    for (const auto& dp : plan.devices)
      if (li >= dp.first_layer && li <= dp.last_layer) return dp.name;
    return plan.devices.front().name;
  };
  const std::string head = plan.devices.front().name;
  for (const ExpectedTensor& t : placed_tensors(c)) {
    const int li = layer_of_tensor(t);
    const std::string dev = li >= 0 ? device_of_layer(li) : head;
    plan.tensor_device[t.name] = dev;
    for (const auto& alias : t.aliases)
      plan.tensor_device[alias] = (alias == "lm_head.weight" && replica) ? plan.devices.back().name : dev;
    if (!t.aliases.empty()) {
      std::vector<std::string> g = {t.name};
      g.insert(g.end(), t.aliases.begin(), t.aliases.end());
      plan.tie_groups.push_back(std::move(g));
    }
  }
  // Stage hand-offs, per pass (encoder commit and every denoising step).
  for (size_t k = 1; k < plan.devices.size(); ++k)
    plan.edges.push_back(
        {plan.devices[k - 1].name, plan.devices[k].name, "hidden states [B, L, H] fp32", s.hidden_handoff});
  if (plan.devices.size() > 1) {
    if (replica) {
      plan.edges.push_back({plan.devices.back().name, head,
                            "self-conditioning soft embedding [B, L, H] fp32 (decoder passes)", s.hidden_handoff});
    } else {
      plan.edges.push_back({plan.devices.back().name, head,
                            "final hidden states [B, L, H] fp32 to the LM head (decoder passes)", s.hidden_handoff});
    }
  }
  return plan;
}

json::Value plan_to_json(const Plan& p) {
  json::Value o = json::Object{};
  json::Array devs;
  for (const auto& d : p.devices) {
    json::Value v = json::Object{};
    v.set("name", d.name);
    v.set("capacity_bytes", d.capacity_bytes);
    v.set("weights_bytes", d.weights_bytes);
    v.set("kv_bytes", d.kv_bytes);
    v.set("workspace_bytes", d.workspace_bytes);
    v.set("margin_bytes", d.margin_bytes);
    v.set("total_bytes", d.total());  // the four above: what the device must hold
    json::Array layers;
    layers.emplace_back(d.first_layer);
    layers.emplace_back(d.last_layer);
    v.set("layers", std::move(layers));
    v.set("holds_embedding", d.holds_embedding);
    v.set("holds_embedding_replica", d.holds_replica);
    devs.emplace_back(std::move(v));
  }
  o.set("devices", std::move(devs));
  json::Value tensors = json::Object{};
  for (const auto& [name, dev] : p.tensor_device) tensors.set(name, dev);
  o.set("tensors", std::move(tensors));
  json::Array groups;
  for (const auto& g : p.tie_groups) {
    json::Array a;
    for (const auto& n : g) a.emplace_back(n);
    groups.emplace_back(std::move(a));
  }
  o.set("tie_groups", std::move(groups));
  json::Array edges;
  for (const auto& e : p.edges) {
    json::Value v = json::Object{};
    v.set("from", e.from);
    v.set("to", e.to);
    v.set("what", e.what);
    v.set("bytes_per_pass", e.bytes_per_step);
    edges.emplace_back(std::move(v));
  }
  o.set("edges", std::move(edges));
  if (p.vision) {
    json::Value v = json::Object{};
    v.set("device", p.vision->device);
    v.set("weights_bytes", p.vision->weights_bytes);
    v.set("activation_bytes", p.vision->activation_bytes);
    v.set("patches", p.vision->patches);
    o.set("vision_tower", std::move(v));
  }
  return o;
}

std::string plan_to_text(const Plan& p) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "%-10s %8s %12s %12s %12s %12s %12s %12s  %s\n", "device", "layers", "weights",
                "kv_cache", "workspace", "margin", "total", "capacity", "notes");
  s += line;
  for (const auto& d : p.devices) {
    std::string layers = d.first_layer < 0 ? "-" : std::to_string(d.first_layer) + "-" + std::to_string(d.last_layer);
    std::string notes;
    if (d.holds_embedding) notes += "embedding+lm_head+self-conditioning+sampler ";
    if (d.holds_replica) notes += "read-only embedding replica (lm_head, sampler)";
    std::snprintf(line, sizeof line, "%-10s %8s %12s %12s %12s %12s %12s %12s  %s\n", d.name.c_str(), layers.c_str(),
                  gib(d.weights_bytes).c_str(), gib(d.kv_bytes).c_str(), gib(d.workspace_bytes).c_str(),
                  gib(d.margin_bytes).c_str(), gib(d.total()).c_str(), gib(d.capacity_bytes).c_str(), notes.c_str());
    s += line;
  }
  s += "total = weights + kv_cache + workspace + margin (memory kept free on each device for what the estimate "
       "leaves out)\n";
  if (p.vision) {
    std::snprintf(line, sizeof line,
                  "vision tower on %s with the encoder's first stage: weights %s, activations %s at %lld patches "
                  "(in its weights and workspace)\n",
                  p.vision->device.c_str(), gib(p.vision->weights_bytes).c_str(),
                  gib(p.vision->activation_bytes).c_str(), (long long)p.vision->patches);
    s += line;
  }
  std::snprintf(line, sizeof line,
                "\n%zu tie groups, each on one device (layer pair i = encoder layer i + decoder layer i)\n",
                p.tie_groups.size());
  s += line;
  for (const auto& e : p.edges) {
    std::snprintf(line, sizeof line, "edge %s -> %s: %s, %s per pass\n", e.from.c_str(), e.to.c_str(), e.what.c_str(),
                  human_bytes(e.bytes_per_step).c_str());
    s += line;
  }
  return s;
}

}  // namespace dgemma

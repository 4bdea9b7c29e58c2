// The placement planner's guarantees (docs/placement.md §2.3), on the
// real 26B-A4B tensor list (sparse fake checkpoint) and the tiny golden model,
// and pipeline execution over virtual CPU devices.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "checkpoint/checkpoint_source.h"
#include "dgemma/error.h"
#include "model/diffusion_gemma.h"
#include "checkpoint/fake_checkpoint.h"
#include "model/weights.h"
#include "backend/cpu/cpu_backend.h"
#include "placement/planner.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

const std::string kData = DGEMMA_TEST_DATA;
constexpr uint64_t kGiB = uint64_t(1) << 30;

struct RealModel {
  ModelConfig config;
  std::map<std::string, uint64_t> bytes;
  uint64_t total_weight_bytes = 0;
};

const RealModel& real_model() {
  static RealModel m = [] {
    RealModel r;
    const std::string dir = dgemma_test_temp_dir("plan_fake");
    FakeCheckpointOptions o;
    o.include_encoder_aliases = true;  // a re-saved checkpoint: storage must still be counted once
    write_sparse_checkpoint(kData + "/configs/diffusiongemma-26b-a4b.config.json", dir, o);
    CheckpointSource src = open_checkpoint(dir);  // the vision sizes the config leaves out come from the tensors
    r.config = std::move(src.config);
    point_layer_ropes(r.config);
    const TensorStore& store = src.store;
    BindOptions bo;
    bo.verify_tied_copies = false;
    for (const auto& b : bind_weights(r.config, store, bo).bound) {
      r.bytes[b.expected.name] = b.nbytes;
      r.total_weight_bytes += b.nbytes;
    }
    return r;
  }();
  return m;
}

PlanRequest request(std::vector<uint64_t> caps_gib, PlanStrategy s = PlanStrategy::kSequential) {
  PlanRequest r;
  for (size_t k = 0; k < caps_gib.size(); ++k) r.devices.push_back({"cuda:" + std::to_string(k), caps_gib[k] * kGiB});
  r.strategy = s;
  return r;
}

// Every guarantee that must hold for any successful plan.
void check_invariants(const Plan& p, const PlanRequest& r, const RealModel& m) {
  // Contiguous layer ranges in execution order covering every layer once.
  int next = 0;
  uint64_t weights = 0;
  for (const auto& d : p.devices) {
    if (d.first_layer >= 0) {
      EXPECT_EQ(d.first_layer, next) << d.name;
      EXPECT_GE(d.last_layer, d.first_layer);
      next = d.last_layer + 1;
    }
    // Budget: weights + KV + workspace + margin <= capacity x utilization.
    EXPECT_LE(d.total(), uint64_t(double(d.capacity_bytes) * r.utilization)) << d.name;
    weights += d.weights_bytes - (d.holds_replica ? m.bytes.at("model.decoder.embed_tokens.weight") : 0);
  }
  EXPECT_EQ(next, m.config.num_layers);
  // Storage counted once even though the files also hold encoder copies.
  EXPECT_EQ(weights, m.total_weight_bytes);
  // Tie groups atomic: every alias on its canonical tensor's device (the LM
  // head only moves as a counted replica).
  for (const auto& g : p.tie_groups) {
    const std::string& home = p.tensor_device.at(g[0]);
    for (const auto& n : g) {
      if (n == "lm_head.weight" && p.devices.back().holds_replica) continue;
      EXPECT_EQ(p.tensor_device.at(n), home) << n;
    }
  }
  // Layer pair i: encoder scalar, decoder scalar and layer weights together.
  for (int i = 0; i < m.config.num_layers; ++i) {
    const std::string s = "layers." + std::to_string(i) + ".";
    EXPECT_EQ(p.tensor_device.at("model.encoder.language_model." + s + "layer_scalar"),
              p.tensor_device.at("model.decoder." + s + "layer_scalar"));
    EXPECT_EQ(p.tensor_device.at("model.decoder." + s + "experts.gate_up_proj"),
              p.tensor_device.at("model.decoder." + s + "self_attn.q_proj.weight"));
  }
  // Embedding, LM head, self-conditioning and final norm together.
  const std::string head = p.tensor_device.at("model.decoder.embed_tokens.weight");
  EXPECT_TRUE(p.devices.front().holds_embedding);
  EXPECT_EQ(head, p.devices.front().name);
  EXPECT_EQ(p.tensor_device.at("model.decoder.self_conditioning.gate_proj.weight"), head);
  EXPECT_EQ(p.tensor_device.at("model.decoder.norm.weight"), head);
  if (!p.devices.back().holds_replica) {
    EXPECT_EQ(p.tensor_device.at("lm_head.weight"), head);
  }
}

TEST(Planner, OneDeviceWhenTheModelFits) {
  const auto& m = real_model();
  for (PlanStrategy s : {PlanStrategy::kSingle, PlanStrategy::kSequential, PlanStrategy::kBalanced}) {
    PlanRequest r = request({80, 80}, s);
    Plan p = make_plan(m.config, m.bytes, r);
    ASSERT_EQ(p.devices.size(), 1u);
    EXPECT_EQ(p.devices[0].first_layer, 0);
    EXPECT_EQ(p.devices[0].last_layer, 29);
    EXPECT_TRUE(p.edges.empty());
    check_invariants(p, r, m);
  }
}

// The vision tower goes with the encoder's first stage (the embedding's
// device): its weights there, and its activations for one image of
// 280 soft tokens (2,520 patches at pooling 3) in that device's workspace.
TEST(Planner, VisionTowerWithTheFirstStageAndItsActivationsCounted) {
  const auto& m = real_model();
  ASSERT_TRUE(m.config.vision_tower);
  uint64_t tower = 0;
  for (const auto& [name, b] : m.bytes)
    if (is_vision_tensor(name)) tower += b;
  ASSERT_GT(tower, uint64_t(1) << 30);  // 27 layers of the published shapes in bf16: about 1.07 GiB
  // fp32 per patch row: 2 patch vectors (3·16²), 8 rows of the width 1152,
  // q/k/v three times (3 · 3·1152), the MLP's gate, up and product (3·4304),
  // and the scores against all 2,520 patches of 16 heads.
  const uint64_t per_row = 2 * 768 + 8 * 1152 + 3 * 3 * 1152 + 3 * 4304 + 16 * 2520;
  const uint64_t activations = 2520 * per_row * 4;
  for (size_t n : {1u, 2u, 4u}) {
    PlanRequest r = request(std::vector<uint64_t>(n, n == 1 ? 80 : n == 2 ? 40 : 24), PlanStrategy::kBalanced);
    const Plan p = make_plan(m.config, m.bytes, r);
    check_invariants(p, r, m);
    ASSERT_TRUE(p.vision.has_value());
    EXPECT_EQ(p.vision->device, p.devices.front().name);
    EXPECT_EQ(p.vision->patches, 2520);
    EXPECT_EQ(p.vision->weights_bytes, tower);
    EXPECT_EQ(p.vision->activation_bytes, activations);
    EXPECT_GE(p.devices.front().workspace_bytes, activations);
    EXPECT_EQ(p.tensor_device.at("model.encoder.vision_tower.encoder.layers.26.mlp.down_proj.linear.weight"),
              p.devices.front().name);
    EXPECT_EQ(p.tensor_device.at("model.encoder.embed_vision.embedding_projection.weight"), p.devices.front().name);
    const std::string text = plan_to_text(p);
    EXPECT_NE(text.find("vision tower on " + p.devices.front().name + " with the encoder's first stage"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("at 2520 patches"), std::string::npos) << text;
    const json::Value v = plan_to_json(p);
    const json::Value* vt = v.find("vision_tower");
    ASSERT_NE(vt, nullptr);
    EXPECT_EQ(vt->find("device")->as_string(), p.devices.front().name);
    EXPECT_EQ(vt->find("activation_bytes")->as_int(), int64_t(activations));
    EXPECT_EQ(vt->find("weights_bytes")->as_int(), int64_t(tower));
    EXPECT_EQ(vt->find("patches")->as_int(), 2520);
  }
  // A smaller image budget: fewer patches, fewer activation bytes.
  PlanRequest r = request({80});
  r.vision_max_soft_tokens = 70;
  EXPECT_EQ(make_plan(m.config, m.bytes, r).vision->patches, 630);
}

// The margin is memory kept free, shown apart from what the model needs: a
// column of its own in the text, a field in the JSON, and the total is the
// sum of the parts in both.
TEST(Planner, MarginIsShownApartAndTotalsAddUp) {
  const auto& m = real_model();
  PlanRequest r = request({40, 40}, PlanStrategy::kBalanced);
  r.margin_bytes = 3 * (uint64_t(1) << 29);  // 1.5 GiB, a value no other column has
  const Plan p = make_plan(m.config, m.bytes, r);
  ASSERT_EQ(p.devices.size(), 2u);
  const std::string text = plan_to_text(p);
  EXPECT_NE(text.find(" margin "), std::string::npos) << text;
  EXPECT_NE(text.find("total = weights + kv_cache + workspace + margin"), std::string::npos) << text;
  const json::Value v = plan_to_json(p);
  for (const json::Value& d : v.find("devices")->as_array()) {
    EXPECT_EQ(d.find("margin_bytes")->as_int(), int64_t(r.margin_bytes));
    EXPECT_EQ(d.find("total_bytes")->as_int(), d.find("weights_bytes")->as_int() + d.find("kv_bytes")->as_int() +
                                                   d.find("workspace_bytes")->as_int() + r.margin_bytes);
    // Each text row shows the margin in its own column, before the total.
    const std::string name = d.find("name")->as_string();
    const size_t row = text.find("\n" + name + " ");
    ASSERT_NE(row, std::string::npos) << text;
    const std::string line = text.substr(row + 1, text.find('\n', row + 1) - row - 1);
    EXPECT_NE(line.find("1.50 GiB"), std::string::npos) << line;
  }
  // A model that does not fit: the error names the margin it counted.
  r = request({8}, PlanStrategy::kSingle);
  r.margin_bytes = 3 * (uint64_t(1) << 29);
  try {
    make_plan(m.config, m.bytes, r);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("the 1.50 GiB margin"), std::string::npos) << e.what();
  }
}

TEST(Planner, TwoFourAndEightDevices) {
  const auto& m = real_model();
  for (size_t n : {2u, 4u, 8u}) {
    for (PlanStrategy s : {PlanStrategy::kSequential, PlanStrategy::kBalanced}) {
      const uint64_t cap = n == 2 ? 40 : n == 4 ? 24 : 12;
      PlanRequest r = request(std::vector<uint64_t>(n, cap), s);
      Plan p = make_plan(m.config, m.bytes, r);
      check_invariants(p, r, m);
      EXPECT_GE(p.devices.size(), 2u);
      if (s == PlanStrategy::kBalanced) {
        EXPECT_EQ(p.devices.size(), n);
        uint64_t lo = UINT64_MAX, hi = 0;
        for (const auto& d : p.devices) {
          lo = std::min(lo, d.total());
          hi = std::max(hi, d.total());
        }
        EXPECT_LT(double(hi - lo), 0.35 * double(hi)) << n << " devices";  // one layer pair is the granularity
      }
      // Hand-offs: stage to stage, and back to the LM head.
      EXPECT_EQ(p.edges.size(), p.devices.size());
      EXPECT_EQ(p.edges.back().to, p.devices.front().name);
    }
  }
}

TEST(Planner, ModelLargerThanOneDeviceIsAnErrorWithTheMinimum) {
  const auto& m = real_model();
  PlanRequest r = request({24}, PlanStrategy::kSingle);
  try {
    make_plan(m.config, m.bytes, r);
    FAIL() << "a 47 GiB model fit on 24 GiB";
  } catch (const PlanError& e) {
    EXPECT_GT(e.min_bytes_per_device, m.total_weight_bytes);
    EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos);
    // The stated minimum is sufficient, and 1 GiB less is not.
    PlanRequest ok = r;
    ok.devices[0].capacity_bytes = e.min_bytes_per_device;
    EXPECT_NO_THROW(make_plan(m.config, m.bytes, ok));
    ok.devices[0].capacity_bytes = e.min_bytes_per_device - kGiB;
    EXPECT_THROW(make_plan(m.config, m.bytes, ok), PlanError);
  }
  // Two 16 GiB devices cannot hold 47 GiB either; no silent offload.
  PlanRequest two = request({16, 16}, PlanStrategy::kBalanced);
  try {
    make_plan(m.config, m.bytes, two);
    FAIL();
  } catch (const PlanError& e) {
    PlanRequest ok = request({0, 0}, PlanStrategy::kBalanced);
    ok.devices[0].capacity_bytes = ok.devices[1].capacity_bytes = e.min_bytes_per_device;
    EXPECT_NO_THROW(make_plan(m.config, m.bytes, ok));
  }
}

TEST(Planner, KvCacheAndWorkspaceAreBudgeted) {
  const auto& m = real_model();
  PlanRequest small = request({40, 40}, PlanStrategy::kBalanced);
  PlanRequest big = small;
  big.max_batch = 4;
  big.max_context = 32768;
  Plan a = make_plan(m.config, m.bytes, small), b = make_plan(m.config, m.bytes, big);
  uint64_t kv_a = 0, kv_b = 0;
  for (const auto& d : a.devices) kv_a += d.kv_bytes;
  for (const auto& d : b.devices) kv_b += d.kv_bytes;
  // Full layers grow with context; sliding layers stay at W-1 = 1023 rows.
  // bf16 K+V: full 5 layers x 2 heads x 512, sliding 25 x 8 x 256.
  const uint64_t expected_b = 4ull * 2 * 2 * (5ull * 2 * 512 * 32768 + 25ull * 8 * 256 * 1023);
  EXPECT_EQ(kv_b, expected_b);
  EXPECT_LT(kv_a, kv_b);
  // The head device carries the logits workspace: 3 x 256 x 262144 fp32 per sequence.
  EXPECT_GE(b.devices.front().workspace_bytes, 4ull * 3 * 256 * 262144 * 4);
}

TEST(Planner, ReplicatedEmbeddingIsCounted) {
  const auto& m = real_model();
  PlanRequest r = request({30, 30}, PlanStrategy::kBalanced);
  r.replicate_embedding = true;
  Plan p = make_plan(m.config, m.bytes, r);
  ASSERT_EQ(p.devices.size(), 2u);
  EXPECT_TRUE(p.devices.back().holds_replica);
  EXPECT_EQ(p.tensor_device.at("lm_head.weight"), p.devices.back().name);
  check_invariants(p, r, m);
}

TEST(Planner, DeterministicAndInputErrors) {
  const auto& m = real_model();
  PlanRequest r = request({24, 24, 24}, PlanStrategy::kBalanced);
  EXPECT_EQ(json::dump(plan_to_json(make_plan(m.config, m.bytes, r))),
            json::dump(plan_to_json(make_plan(m.config, m.bytes, r))));
  EXPECT_EQ(parse_bytes("80GiB"), 80 * kGiB);
  EXPECT_EQ(parse_bytes("1.5GB"), 1500000000ull);
  EXPECT_THROW(parse_bytes("80 parsecs"), Error);
  EXPECT_THROW(parse_device_list("cuda:0"), Error);
  EXPECT_THROW(parse_device_list("cuda:0=1GiB,cuda:0=2GiB"), Error);
  EXPECT_THROW(parse_strategy("random"), Error);
}

// OpenCL devices by their `dgemma devices` names, with or without a size: a
// device given without one is sized by the callback (the tools read the
// device's memory, backend_factory.h device_memory_bytes), and only it is asked.
TEST(Planner, OpenClDevicesWithAndWithoutSizes) {
  const std::vector<DeviceSpec> given = parse_device_list("opencl:0.0=16GiB,opencl:1.0=8GiB,cuda:0=80GiB");
  ASSERT_EQ(given.size(), 3u);
  EXPECT_EQ(given[0].name, "opencl:0.0");
  EXPECT_EQ(given[0].capacity_bytes, 16 * kGiB);
  EXPECT_EQ(given[1].name, "opencl:1.0");
  std::vector<std::string> asked;
  const auto capacity_of = [&](const std::string& name) {
    asked.push_back(name);
    return uint64_t(12) * kGiB + asked.size();
  };
  const std::vector<DeviceSpec> read = parse_device_list("opencl:0.0,cpu:1=64GiB,opencl:0.1", capacity_of);
  EXPECT_EQ(asked, (std::vector<std::string>{"opencl:0.0", "opencl:0.1"}));
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[0].capacity_bytes, 12 * kGiB + 1);
  EXPECT_EQ(read[1].capacity_bytes, 64 * kGiB);
  EXPECT_EQ(read[2].capacity_bytes, 12 * kGiB + 2);
  // Without the callback a size is required, and the error says so.
  try {
    parse_device_list("opencl:0.0");
    ADD_FAILURE() << "a device without a size was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "device 'opencl:0.0': expected NAME=SIZE, e.g. cuda:0=80GiB");
  }
  EXPECT_THROW(parse_device_list("opencl:0.0=16GiB,opencl:0.0", capacity_of), Error);  // listed twice
}

// A host with four GPUs that OpenCL drives (docs/placement.md §2.4): the
// 26B-A4B model over four 24 GiB devices, balanced, one stage each, named as
// `dgemma devices` names them.
TEST(Planner, FourOpenClDevices) {
  const auto& m = real_model();
  PlanRequest r;
  r.devices = parse_device_list("opencl:0.0=24GiB,opencl:0.1=24GiB,opencl:0.2=24GiB,opencl:0.3=24GiB");
  r.strategy = PlanStrategy::kBalanced;
  const Plan p = make_plan(m.config, m.bytes, r);
  check_invariants(p, r, m);
  ASSERT_EQ(p.devices.size(), 4u);
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(p.devices[k].name, "opencl:0." + std::to_string(k));
  EXPECT_EQ(p.tensor_device.at("lm_head.weight"), "opencl:0.0");
  EXPECT_EQ(p.devices.back().last_layer, m.config.num_layers - 1);
}

TEST(PipelineExecution, VirtualCpuDevicesMatchSingleDeviceBitForBit) {
  const std::string golden = kData + "/golden_a";
  auto single = test::load_on_cpu(golden);
  auto staged = test::load_on_cpu(golden);
  // Plan the tiny model over two virtual CPU devices too small for it alone.
  std::map<std::string, uint64_t> bytes;
  for (const auto& b : staged->weights().bound) bytes[b.expected.name] = b.nbytes;
  PlanRequest r;
  r.margin_bytes = 0;
  r.max_context = 64;
  r.utilization = 1.0;
  r.strategy = PlanStrategy::kBalanced;
  r.vision_max_soft_tokens = 0;  // text prompts only: no room kept for a picture through the tower
  r.devices = {{"cpu:0", 1000000}, {"cpu:1", 1000000}};
  Plan p = make_plan(staged->config(), bytes, r);
  ASSERT_EQ(p.devices.size(), 2u);
  CpuBackend dev0(1), dev1(2);
  std::vector<Backend*> per_layer;
  for (int i = 0; i < staged->config().num_layers; ++i)
    per_layer.push_back(i <= p.devices[0].last_layer ? static_cast<Backend*>(&dev0) : &dev1);
  staged->set_layer_backends(per_layer);
  const std::vector<int32_t> prompt = {2, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57};
  single->encode(prompt);
  staged->encode(prompt);
  std::vector<int32_t> canvas(16);
  for (int k = 0; k < 16; ++k) canvas[size_t(k)] = 100 + k;
  std::vector<float> a(16 * 512), b(16 * 512);
  single->decode(canvas.data(), nullptr, a.data());
  staged->decode(canvas.data(), nullptr, b.data());
  EXPECT_EQ(a, b);
  single->decode(canvas.data(), a.data(), a.data());
  staged->decode(canvas.data(), b.data(), b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace dgemma

// The differential checker names exactly the op, layer, pass and step of an
// injected fault, for every op kind of the vocabulary and every fault kind.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "backend/backend_factory.h"
#include "doctor/doctor.h"
#include "backend/inject_backend.h"
#include "dgemma/error.h"
#include "ops/op.h"

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

struct Site {
  OpKind op;
  int layer;
  Pass pass;
  int step;
};

// One invocation of each op kind that exists in a prefill + 2 denoising steps.
const std::vector<Site> kSites = {
    {OpKind::kEmbedding, -1, Pass::kEncoder, 0}, {OpKind::kSoftEmbedding, -1, Pass::kDecoder, 1},
    {OpKind::kRmsNorm, 0, Pass::kEncoder, 0},    {OpKind::kLinear, 2, Pass::kDecoder, 1},
    {OpKind::kRope, 3, Pass::kDecoder, 0},       {OpKind::kAttention, 1, Pass::kEncoder, 0},
    {OpKind::kRouterTopk, 0, Pass::kDecoder, 1}, {OpKind::kMoeExperts, 3, Pass::kEncoder, 0},
    {OpKind::kGeluGlu, 2, Pass::kDecoder, 0},    {OpKind::kAdd, 1, Pass::kDecoder, 1},
    {OpKind::kScale, 3, Pass::kDecoder, 1},      {OpKind::kSoftcap, -1, Pass::kDecoder, 1},
    {OpKind::kConcatRows, 2, Pass::kEncoder, 0}, {OpKind::kSample, -1, Pass::kDecoder, 1},
};

std::string spec_of(const Site& s, const char* kind) {
  return "inject:" + std::string(op_name(s.op)) + ":" + (s.layer < 0 ? "model" : std::to_string(s.layer)) + ":" +
         std::string(pass_name(s.pass)) + ":" + std::to_string(s.step) + ":" + kind;
}

// The ops only a prompt with images runs (the vision tower and the merge of
// its soft tokens, docs/model.md §7): the doctor runs them through golden A's
// one-layer tower (tests below); the text sites above never reach them.
bool vision_only(OpKind k) { return k == OpKind::kAffine || k == OpKind::kPoolCells || k == OpKind::kScatterRows; }
constexpr int kTextOpKinds = kNumOpKinds - 3;

TEST(DoctorInjection, EveryOpKindIsCovered) {
  std::set<OpKind> kinds;
  for (const Site& s : kSites) kinds.insert(s.op);
  for (int k = 0; k < kNumOpKinds; ++k) EXPECT_NE(kinds.count(OpKind(k)), vision_only(OpKind(k))) << op_name(OpKind(k));
  EXPECT_EQ(int(kinds.size()), kTextOpKinds);
}

class DoctorFault : public ::testing::TestWithParam<const char*> {};

TEST_P(DoctorFault, NamesTheInjectedOp) {
  const char* kind = GetParam();
  for (const Site& s : kSites) {
    DoctorOptions o;
    o.model_dir = kGolden;
    o.backend = spec_of(s, kind);
    o.threads = 1;
    DoctorReport r = run_doctor(o);
    ASSERT_TRUE(r.first_failure.has_value()) << o.backend;
    const OpFailure& f = *r.first_failure;
    EXPECT_EQ(f.op, op_name(s.op)) << o.backend;
    EXPECT_EQ(f.layer, s.layer) << o.backend;
    EXPECT_EQ(f.pass, pass_name(s.pass)) << o.backend;
    EXPECT_EQ(f.step, s.step) << o.backend;
    const std::string k = kind;
    if (k == "crash") {
      EXPECT_EQ(f.kind, "crash") << o.backend;
    } else if (k == "oob") {
      EXPECT_EQ(f.kind, "oob") << o.backend;
    } else if (k == "nan" && s.op != OpKind::kRouterTopk) {
      EXPECT_EQ(f.kind, "nan") << o.backend;  // integer outputs cannot hold NaN: -1 is reported as a value error
      EXPECT_TRUE(std::isnan(f.cosine)) << o.backend << " cosine " << f.cosine;
      EXPECT_TRUE(std::isnan(r.per_op.at(f.op).min_cosine)) << o.backend;
      EXPECT_TRUE(doctor_report_json(r).find("first_failure")->find("cosine")->is_null()) << o.backend;
    } else {
      EXPECT_TRUE(f.kind == "value" || f.kind == "nan") << o.backend << " " << f.kind;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, DoctorFault, ::testing::Values("value", "nan", "oob", "crash"));

TEST(Doctor, CpuAgainstItselfFindsNothing) {
  DoctorOptions o;
  o.model_dir = kGolden;
  o.steps = 3;
  DoctorReport r = run_doctor(o);
  EXPECT_FALSE(r.first_failure.has_value());
  EXPECT_GT(r.ops_compared, 400);
  // Every op kind: golden A has a vision tower, so the prefill carries a
  // synthetic image through it (the vision pass) and merges its soft tokens.
  EXPECT_EQ(r.per_op.size(), size_t(kNumOpKinds));
  for (int k = 0; k < kNumOpKinds; ++k) {
    if (vision_only(OpKind(k))) {
      EXPECT_GT(r.per_op.at(std::string(op_name(OpKind(k)))).count, 0) << op_name(OpKind(k));
    }
  }
  EXPECT_GT(r.vision_ops_compared, 10);
  EXPECT_EQ(doctor_report_json(r).find("vision_ops_compared")->as_int(), r.vision_ops_compared);
  for (const auto& [op, st] : r.per_op) EXPECT_EQ(st.max_abs, 0.0) << op;
  EXPECT_TRUE(doctor_report_json(r).find("first_failure")->is_null());
}

// A fault in a vision op is named with its pass: on golden V (a two-layer
// tower with standardization) and golden A (one layer, none), the pooler's
// cell sums, a tower layer's attention and the standardization's affine map.
TEST(Doctor, NamesTheFirstDivergingVisionOp) {
  struct VisionSite {
    std::string model, spec, op, site;
    int layer;
  };
  const std::string golden_v = std::string(DGEMMA_TEST_DATA) + "/golden_v";
  const std::vector<VisionSite> sites = {
      {golden_v, "inject:pool_cells:model:vision:0:value", "pool_cells", "pooler.cells", -1},
      {golden_v, "inject:attention:1:vision:0:nan", "attention", "self_attn.attention", 1},
      {golden_v, "inject:affine:model:vision:0:value:standardize", "affine", "standardize", -1},
      {kGolden, "inject:pool_cells:model:vision:0:value", "pool_cells", "pooler.cells", -1},
      {kGolden, "inject:linear:0:vision:0:value:mlp.down_proj", "linear", "mlp.down_proj", 0},
  };
  for (const VisionSite& s : sites) {
    DoctorOptions o;
    o.model_dir = s.model;
    o.backend = s.spec;
    o.threads = 1;
    o.steps = 1;
    const DoctorReport r = run_doctor(o);
    ASSERT_TRUE(r.first_failure.has_value()) << s.spec;
    const OpFailure& f = *r.first_failure;
    EXPECT_EQ(f.op, s.op) << s.spec;
    EXPECT_EQ(f.site, s.site) << s.spec;
    EXPECT_EQ(f.layer, s.layer) << s.spec;
    EXPECT_EQ(f.pass, "vision") << s.spec;
    EXPECT_EQ(f.step, 0) << s.spec;
    const std::string text = doctor_report_text(r);
    EXPECT_NE(text.find("FIRST FAILURE: op " + s.op + " (" + s.site + ")"), std::string::npos) << text;
    EXPECT_NE(text.find("vision pass"), std::string::npos) << text;
  }
  EXPECT_EQ(parse_inject_spec("inject:pool_cells:model:vision:0:value").pass, Pass::kVision);
}

TEST(Doctor, BisectionConfirmsTheCulprit) {
  DoctorOptions o;
  o.model_dir = kGolden;
  o.backend = "inject:attention:2:decoder:1:crash";
  o.bisect = true;
  DoctorReport r = run_doctor(o);
  ASSERT_TRUE(r.first_failure);
  EXPECT_EQ(r.first_failure->op, "attention");
  EXPECT_EQ(r.first_failure->layer, 2);
  EXPECT_TRUE(r.bisected);
  EXPECT_GT(r.bisect_runs, 3);
}

TEST(Doctor, BadSpecsAreClearErrors) {
  EXPECT_THROW(parse_inject_spec("inject:matmul:0:encoder:0:value"), Error);
  EXPECT_THROW(parse_inject_spec("inject:linear:x:encoder:0:value"), Error);
  EXPECT_THROW(parse_inject_spec("inject:linear:0:middle:0:value"), Error);
  EXPECT_THROW(parse_inject_spec("inject:linear:0:encoder:0:melt"), Error);
  DoctorOptions o;
  o.model_dir = kGolden;
  o.backend = "tpu";
  try {
    run_doctor(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown backend 'tpu'"), std::string::npos);
  }
}

}  // namespace
}  // namespace dgemma

namespace dgemma {
namespace {

// doctor --sync and run --debug-device add a CUDA option; CPU-side backends
// are synchronous already and keep their names.
TEST(BackendNames, DeviceOptionsAttachToCudaNamesOnly) {
  EXPECT_EQ(with_device_option("cuda", "sync"), "cuda:sync");
  EXPECT_EQ(with_device_option("cuda:1", "sync"), "cuda:1,sync");
  EXPECT_EQ(with_device_option("cuda:debug", "sync"), "cuda:debug,sync");
  EXPECT_EQ(with_device_option("cpu", "debug"), "cpu");
  EXPECT_EQ(with_device_option("inject:linear:0:encoder:0:nan", "sync"), "inject:linear:0:encoder:0:nan");
}

}  // namespace
}  // namespace dgemma

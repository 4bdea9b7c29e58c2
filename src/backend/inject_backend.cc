#include "backend/inject_backend.h"

#include <csignal>
#include <cmath>
#include <sstream>
#include <vector>

#include "dgemma/error.h"

namespace dgemma {

std::string_view fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::kValue: return "value";
    case FaultKind::kNan: return "nan";
    case FaultKind::kOutOfBounds: return "oob";
    case FaultKind::kCrash: return "crash";
  }
  return "?";
}

OpKind parse_op_name(std::string_view name) {
  for (int k = 0; k < kNumOpKinds; ++k)
    if (op_name(OpKind(k)) == name) return OpKind(k);
  std::string all;
  for (int k = 0; k < kNumOpKinds; ++k) all += (k ? ", " : "") + std::string(op_name(OpKind(k)));
  throw Error("unknown op '" + std::string(name) + "' (ops: " + all + ")");
}

InjectSpec parse_inject_spec(const std::string& text) {
  std::string s = text.rfind("inject:", 0) == 0 ? text.substr(7) : text;
  std::string inner = "cpu";
  if (const size_t at = s.find('@'); at != std::string::npos) {
    inner = s.substr(at + 1);
    s.resize(at);
    if (inner.empty())
      throw Error("injection spec '" + text + "': nothing after '@' (the backend the op runs on, e.g. @opencl:0.0)");
    if (inner.rfind("inject", 0) == 0)
      throw Error("injection spec '" + text + "': BACKEND after '@' cannot be another injection, got '" + inner + "'");
  }
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ':')) parts.push_back(item);
  if (parts.size() != 5 && parts.size() != 6)
    throw Error("injection spec '" + text + "': expected inject:OP:LAYER:PASS:STEP:KIND[:SITE][@BACKEND]");
  InjectSpec spec;
  spec.op = parse_op_name(parts[0]);
  if (parts[1] == "model" || parts[1] == "-1") {
    spec.layer = -1;
  } else {
    try {
      size_t used = 0;
      spec.layer = std::stoi(parts[1], &used);
      if (used != parts[1].size() || spec.layer < 0) throw std::invalid_argument("layer");
    } catch (const std::exception&) {
      throw Error("injection spec '" + text + "': LAYER must be a layer index or 'model', got '" + parts[1] + "'");
    }
  }
  if (parts[2] == "encoder")
    spec.pass = Pass::kEncoder;
  else if (parts[2] == "decoder")
    spec.pass = Pass::kDecoder;
  else if (parts[2] == "vision")
    spec.pass = Pass::kVision;
  else
    throw Error("injection spec '" + text + "': PASS must be encoder, decoder or vision, got '" + parts[2] + "'");
  try {
    size_t used = 0;
    spec.step = std::stoi(parts[3], &used);
    if (used != parts[3].size() || spec.step < 0) throw std::invalid_argument("step");
  } catch (const std::exception&) {
    throw Error("injection spec '" + text + "': STEP must be a non-negative integer, got '" + parts[3] + "'");
  }
  const std::string& k = parts[4];
  if (k == "value")
    spec.kind = FaultKind::kValue;
  else if (k == "nan")
    spec.kind = FaultKind::kNan;
  else if (k == "oob")
    spec.kind = FaultKind::kOutOfBounds;
  else if (k == "crash")
    spec.kind = FaultKind::kCrash;
  else
    throw Error("injection spec '" + text + "': KIND must be value, nan, oob or crash, got '" + k + "'");
  if (parts.size() == 6) spec.site = parts[5];
  spec.inner = inner;
  return spec;
}

std::string InjectBackend::name() const { return "inject(" + inner_->name() + ")"; }

bool InjectBackend::matches(const OpCall& c) const {
  return !fired_ && c.kind == spec_.op && c.layer == spec_.layer && c.pass == spec_.pass && c.step == spec_.step &&
         (spec_.site.empty() || c.site == spec_.site);
}

void InjectBackend::run(const OpCall& call) {
  const bool hit = matches(call);
  if (hit && spec_.kind == FaultKind::kCrash) {
    fired_ = true;
    // What a device page fault looks like to the host process. The default
    // action, whatever handler a driver installed (PoCL's LLVM has its own).
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  }
  inner_->run(call);
  if (!hit) return;
  fired_ = true;
  for (Tensor* o : call.out) {
    const size_t n = size_t(o->numel());
    // An output the inner backend left on its device is corrupted on the
    // host, where it lives from now on.
    if (spec_.kind != FaultKind::kOutOfBounds) {
      o->ensure_host();
      o->host_written();
    }
    if (spec_.kind == FaultKind::kValue) {
      for (size_t k = 0; k < n; ++k) {
        if (o->dtype == DType::kF32)
          o->f[k] += 1000.0f;
        else
          o->i[k] += 1;
      }
    } else if (spec_.kind == FaultKind::kNan) {
      for (size_t k = 0; k < n; ++k) {
        if (o->dtype == DType::kF32)
          o->f[k] = std::nanf("");
        else
          o->i[k] = -1;
      }
    }
  }
  if (spec_.kind == FaultKind::kOutOfBounds) {
    // Writes just past the logical end. The checker hands out outputs with
    // canary padding, so this lands in the canary rather than in foreign
    // memory; outside the checker the storage has no padding and the write
    // is skipped (never corrupt real memory).
    Tensor* o = call.out[0];
    const size_t n = size_t(o->numel());
    if (o->dtype == DType::kF32 && o->f.size() > n) o->f[n + 1] = 42.0f;
    if (o->dtype == DType::kI32 && o->i.size() > n) o->i[n + 1] = 42;
  }
}

}  // namespace dgemma

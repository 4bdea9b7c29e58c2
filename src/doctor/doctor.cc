#include "doctor/doctor.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <span>

#include "backend/backend_factory.h"
#include "dgemma/error.h"
#include "model/diffusion_gemma.h"

namespace dgemma {
namespace {

std::string shapes_of(const std::vector<const Tensor*>& ts) {
  std::string s;
  for (const Tensor* t : ts) {
    if (!s.empty()) s += ' ';
    s += t->shape_string();
    s += t->dtype == DType::kI32 ? "i32" : "f32";
  }
  return s;
}

// A measure across the pipe to the parent: JSON has no NaN or infinity, so
// those travel as the strings "nan", "inf" and "-inf".
json::Value wire_number(double x) {
  if (std::isnan(x)) return json::Value("nan");
  if (std::isinf(x)) return json::Value(x > 0 ? "inf" : "-inf");
  return json::Value(x);
}
double from_wire(const json::Value& v) {
  if (!v.is_string()) return v.as_double();
  if (v.as_string() == "nan") return std::nan("");
  return v.as_string() == "inf" ? INFINITY : -INFINITY;
}

// In the report: null where the measure is NaN or infinite.
json::Value report_number(double x) { return std::isfinite(x) ? json::Value(x) : json::Value(); }

// Worst-of for the per-op table; a NaN sticks (a comparison with NaN would
// otherwise keep the earlier, clean value).
double worst_max(double acc, double x) { return std::isnan(acc) || std::isnan(x) ? std::nan("") : std::max(acc, x); }
double worst_min(double acc, double x) { return std::isnan(acc) || std::isnan(x) ? std::nan("") : std::min(acc, x); }

// Streams one JSON object per line to the parent.
class PipeListener : public DifferentialListener {
 public:
  explicit PipeListener(int fd) : fd_(fd) {}
  void on_begin(int64_t index, const OpCall& c) override {
    json::Value o = json::Object{};
    o.set("begin", index);
    o.set("op", std::string(op_name(c.kind)));
    o.set("site", std::string(c.site));
    o.set("layer", c.layer);
    o.set("pass", std::string(pass_name(c.pass)));
    o.set("step", c.step);
    o.set("inputs", shapes_of(c.in));
    std::vector<const Tensor*> outs(c.out.begin(), c.out.end());
    o.set("outputs", shapes_of(outs));
    send(o);
  }
  void on_result(int64_t index, const OpCall&, const OpComparison& r) override {
    json::Value o = json::Object{};
    o.set("result", index);
    o.set("ok", r.ok);
    o.set("kind", r.failure);
    o.set("message", r.message);
    o.set("max_abs", wire_number(r.max_abs));
    o.set("max_rel", wire_number(r.max_rel));
    o.set("cosine", wire_number(r.cosine));
    send(o);
  }
  void send(const json::Value& v) {
    std::string line = json::dump(v) + "\n";
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      ssize_t w = ::write(fd_, p, left);
      if (w <= 0) _exit(3);
      p += w;
      left -= size_t(w);
    }
  }

 private:
  int fd_;
};

// The image the check runs through a model's vision tower (docs/model.md §7):
// k patch rows of 2k patch columns (2 soft tokens, so the pooler fills more
// than one cell), deterministic pixels in [0, 1].
VisionInput doctor_image(const VisionConfig& v) {
  const int64_t k = v.pooling_kernel_size, p = v.patch_size;
  VisionInput im;
  im.grid_h = k;
  im.grid_w = 2 * k;
  im.n_soft = 2;
  const int64_t n = im.grid_h * im.grid_w, values = 3 * p * p;
  im.pixel_values = Tensor::f32({n, values});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < values; ++j)
      im.pixel_values.f[size_t(r * values + j)] = float((7 * r + 13 * j) % 256) / 255.0f;
  im.positions = Tensor::i32({n, 2});
  for (int64_t r = 0; r < n; ++r) {
    im.positions.i[size_t(2 * r)] = int32_t(r % im.grid_w);
    im.positions.i[size_t(2 * r + 1)] = int32_t(r / im.grid_w);
  }
  return im;
}

// The prompt's prefill; with a vision tower (and the image token ids), an
// image block after the first token: BOI, one placeholder per soft token,
// EOI (docs/model.md §7.6), so the tower's ops and the encoder's image mask
// are checked too.
void encode_prompt(DiffusionGemma& model, const std::vector<int32_t>& prompt) {
  const ModelConfig& c = model.config();
  if (prompt.empty() || !model.has_vision_tower() || c.image_token_id < 0 || c.boi_token_id < 0 || c.eoi_token_id < 0) {
    model.encode(prompt);
    return;
  }
  const VisionInput image = doctor_image(c.vision);
  std::vector<int32_t> ids(prompt.begin(), prompt.begin() + 1);
  ids.push_back(int32_t(c.boi_token_id));
  ids.insert(ids.end(), size_t(image.n_soft), int32_t(c.image_token_id));
  ids.push_back(int32_t(c.eoi_token_id));
  ids.insert(ids.end(), prompt.begin() + 1, prompt.end());
  model.encode_with_images(ids, std::span<const VisionInput>(&image, 1));
}

[[noreturn]] void child_main(const DoctorOptions& opt, int64_t target_limit, int fd) {
  PipeListener out(fd);
  try {
    ModelOptions mo;
    mo.load_threads = opt.threads;
    mo.precision = opt.precision_bf16 ? WeightPrecision::kBF16 : WeightPrecision::kAsStored;
    mo.load_progress = opt.load_progress;
    mo.quantize = opt.quantize;
    auto model = opt.config_path.empty()
                     ? DiffusionGemma::load(opt.model_dir, make_cpu_backend(opt.threads), mo)
                     : DiffusionGemma::load(opt.model_dir, opt.config_path, make_cpu_backend(opt.threads), mo);
    std::unique_ptr<Backend> reference = make_cpu_backend(opt.threads, opt.bf16_dot, opt.int8_dot);
    const char* mode = opt.int8_dot ? "int8-dot" : opt.bf16_dot ? "bf16-dot" : nullptr;
    std::unique_ptr<Backend> target =
        make_backend(mode ? with_device_option(opt.backend, mode) : opt.backend, opt.threads);
    DifferentialOptions dopt;
    dopt.tolerance = opt.tolerance;
    dopt.routing_from_reference = opt.routing_from_reference;
    dopt.target_limit = target_limit;
    DifferentialBackend diff(*reference, *target, out, dopt);
    model->set_backend(diff);
    const int64_t V = model->vocab_size(), L = model->canvas_length();
    std::vector<int32_t> prompt = opt.prompt;
    if (prompt.empty())
      for (int k = 0; k < 12; ++k) prompt.push_back(int32_t((k == 0 ? 2 : 101 + 37 * k) % V));
    encode_prompt(*model, prompt);
    // N denoising steps as generate() runs them on this model (decode and
    // the sample op, so every op of the vocabulary is checked), with
    // self-conditioning from the previous step's tempered logits and fixed
    // uniforms for draw B; the canvas follows the argmax (deterministic).
    std::vector<int32_t> canvas(static_cast<size_t>(L));
    for (int64_t k = 0; k < L; ++k) canvas[size_t(k)] = int32_t((7 * k + 3) % V);
    std::vector<double> uniforms(static_cast<size_t>(L));
    for (int64_t k = 0; k < L; ++k) uniforms[size_t(k)] = double((37 * k + 11) % 64) / 64.0;
    RowSamples rows;
    for (int s = 0; s < opt.steps; ++s) {
      model->decode_sample(canvas.data(), s > 0, 0.8f, uniforms.data(), rows);
      canvas = rows.argmax;
    }
    json::Value done = json::Object{};
    done.set("done", diff.ops_seen());
    out.send(done);
  } catch (const std::exception& e) {
    json::Value err = json::Object{};
    err.set("fatal", std::string(e.what()));
    out.send(err);
    _exit(2);
  }
  _exit(0);
}

struct ChildRun {
  std::vector<json::Value> lines;
  std::string status;
  bool clean_exit = false;
  std::string fatal;
};

ChildRun run_child(const DoctorOptions& opt, int64_t target_limit) {
  int fds[2];
  if (pipe(fds) != 0) throw Error(std::string("doctor: pipe failed: ") + std::strerror(errno));
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw Error(std::string("doctor: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    child_main(opt, target_limit, fds[1]);
  }
  close(fds[1]);
  ChildRun run;
  std::string buf;
  char chunk[65536];
  ssize_t n;
  while ((n = read(fds[0], chunk, sizeof chunk)) > 0) buf.append(chunk, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  size_t start = 0;
  while (start < buf.size()) {
    size_t end = buf.find('\n', start);
    if (end == std::string::npos) break;  // a torn last line from a crash
    json::Value v = json::parse(std::string_view(buf).substr(start, end - start));
    if (const json::Value* f = v.find("fatal")) run.fatal = f->as_string();
    run.lines.push_back(std::move(v));
    start = end + 1;
  }
  if (WIFSIGNALED(status)) {
    run.status = "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  } else {
    run.status = "exited " + std::to_string(WEXITSTATUS(status));
    run.clean_exit = WEXITSTATUS(status) == 0;
  }
  return run;
}

// Folds one child run into a report: stats per op, first failure, crash
// attribution (an op that began and never reported).
DoctorReport fold(const ChildRun& run, const std::string& backend) {
  DoctorReport rep;
  rep.backend = backend;
  rep.child_status = run.status;
  std::map<int64_t, const json::Value*> begun;
  bool done = false;
  for (const json::Value& v : run.lines) {
    if (const json::Value* b = v.find("begin")) {
      begun[b->as_int()] = &v;
    } else if (const json::Value* r = v.find("result")) {
      const int64_t idx = r->as_int();
      const json::Value& b = *begun.at(idx);
      begun.erase(idx);
      OpStats& st = rep.per_op[b.find("op")->as_string()];
      const bool refused = v.find("kind")->as_string() == "unsupported";
      ++(refused ? rep.ops_unsupported : rep.ops_compared);
      if (!refused && b.find("pass")->as_string() == "vision") ++rep.vision_ops_compared;
      ++(refused ? st.unsupported : st.count);
      if (!refused) {
        st.max_abs = worst_max(st.max_abs, from_wire(*v.find("max_abs")));
        st.max_rel = worst_max(st.max_rel, from_wire(*v.find("max_rel")));
        st.min_cosine = worst_min(st.min_cosine, from_wire(*v.find("cosine")));
      }
      if (!v.find("ok")->as_bool() && !rep.first_failure) {
        OpFailure f;
        f.index = idx;
        f.op = b.find("op")->as_string();
        f.site = b.find("site")->as_string();
        f.layer = int(b.find("layer")->as_int());
        f.pass = b.find("pass")->as_string();
        f.step = int(b.find("step")->as_int());
        f.inputs = b.find("inputs")->as_string();
        f.outputs = b.find("outputs")->as_string();
        f.kind = v.find("kind")->as_string();
        f.message = v.find("message")->as_string();
        f.max_abs = from_wire(*v.find("max_abs"));
        f.max_rel = from_wire(*v.find("max_rel"));
        f.cosine = from_wire(*v.find("cosine"));
        rep.first_failure = f;
      }
    } else if (v.find("done")) {
      done = true;
    }
  }
  if (!run.fatal.empty() && !rep.first_failure)
    throw Error("doctor: the run failed before any op diverged: " + run.fatal);
  if (!done && !rep.first_failure) {
    if (begun.empty()) throw Error("doctor: the checked process " + run.status + " before running any op");
    const json::Value& b = *begun.begin()->second;
    OpFailure f;
    f.index = begun.begin()->first;
    f.op = b.find("op")->as_string();
    f.site = b.find("site")->as_string();
    f.layer = int(b.find("layer")->as_int());
    f.pass = b.find("pass")->as_string();
    f.step = int(b.find("step")->as_int());
    f.inputs = b.find("inputs")->as_string();
    f.outputs = b.find("outputs")->as_string();
    f.kind = "crash";
    f.message = "the target " + run.status + " inside this op";
    rep.first_failure = f;
  }
  return rep;
}

}  // namespace

DoctorReport run_doctor(const DoctorOptions& opt) {
  if (opt.steps < 1) throw Error("doctor: --steps must be >= 1, got " + std::to_string(opt.steps));
  check_backend_name(opt.backend);  // before forking, without starting an OpenCL driver here
  if (opencl_unusable_after_fork(opt.backend))
    throw Error("doctor: --backend " + opt.backend +
                ": this process has already started an OpenCL driver, which does not work in the forked child "
                "that runs the check; run the doctor from a process that has not used OpenCL");
  DoctorReport rep = fold(run_child(opt, -1), opt.backend);
  if (opt.bisect && rep.first_failure) {
    // Smallest prefix of target-executed ops that still fails: for faults
    // that surface after the op that caused them (asynchronous devices).
    int64_t lo = 1, hi = rep.first_failure->index + 1;
    int runs = 0;
    DoctorReport best = rep;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      DoctorReport r = fold(run_child(opt, mid), opt.backend);
      ++runs;
      if (r.first_failure) {
        hi = mid;
        best = r;
      } else {
        lo = mid + 1;
      }
    }
    if (hi != rep.first_failure->index + 1) rep.first_failure = best.first_failure;
    rep.bisected = true;
    rep.bisect_runs = runs;
  }
  return rep;
}

json::Value doctor_report_json(const DoctorReport& r) {
  json::Value o = json::Object{};
  o.set("backend", r.backend);
  o.set("reference", "cpu");
  o.set("ops_compared", r.ops_compared);
  o.set("ops_unsupported", r.ops_unsupported);
  o.set("vision_ops_compared", r.vision_ops_compared);
  o.set("child_status", r.child_status);
  if (r.first_failure) {
    const OpFailure& f = *r.first_failure;
    json::Value ff = json::Object{};
    ff.set("op", f.op);
    ff.set("site", f.site);
    ff.set("layer", f.layer);
    ff.set("pass", f.pass);
    ff.set("step", f.step);
    ff.set("kind", f.kind);
    ff.set("index", f.index);
    ff.set("max_abs", report_number(f.max_abs));
    ff.set("max_rel", report_number(f.max_rel));
    ff.set("cosine", report_number(f.cosine));
    ff.set("inputs", f.inputs);
    ff.set("outputs", f.outputs);
    ff.set("message", f.message);
    o.set("first_failure", std::move(ff));
  } else {
    o.set("first_failure", nullptr);
  }
  json::Value ops = json::Object{};
  for (const auto& [name, st] : r.per_op) {
    json::Value s = json::Object{};
    s.set("count", st.count);
    s.set("unsupported", st.unsupported);
    s.set("max_abs", report_number(st.max_abs));
    s.set("max_rel", report_number(st.max_rel));
    s.set("min_cosine", report_number(st.min_cosine));
    ops.set(name, std::move(s));
  }
  o.set("ops", std::move(ops));
  if (r.bisected) o.set("bisect_runs", r.bisect_runs);
  return o;
}

std::string doctor_report_text(const DoctorReport& r) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "doctor: %s vs cpu reference, %lld ops compared (teacher-forced), child %s\n",
                r.backend.c_str(), (long long)r.ops_compared, r.child_status.c_str());
  s += line;
  if (r.vision_ops_compared > 0) {
    std::snprintf(line, sizeof line, "%lld of them in the vision pass (a synthetic image through the vision tower)\n",
                  (long long)r.vision_ops_compared);
    s += line;
  }
  if (r.ops_unsupported > 0) {
    std::snprintf(line, sizeof line, "%lld ops not run: the target does not support them (listed below)\n",
                  (long long)r.ops_unsupported);
    s += line;
  }
  std::snprintf(line, sizeof line, "\n%-16s %7s %12s %12s %12s\n", "op", "count", "max_abs", "max_rel", "min_cosine");
  s += line;
  for (const auto& [name, st] : r.per_op) {
    if (st.count > 0) {
      std::snprintf(line, sizeof line, "%-16s %7lld %12.3g %12.3g %12.8f\n", name.c_str(), (long long)st.count,
                    st.max_abs, st.max_rel, st.min_cosine);
      s += line;
    }
    if (st.unsupported > 0) {
      std::snprintf(line, sizeof line, "%-16s %7lld   not run: the target does not support it\n", name.c_str(),
                    (long long)st.unsupported);
      s += line;
    }
  }
  if (!r.first_failure) {
    s += "\nall ops agree with the reference\n";
    return s;
  }
  const OpFailure& f = *r.first_failure;
  std::snprintf(line, sizeof line, "\nFIRST FAILURE: op %s (%s), layer %s, %s pass, step %d, op #%lld: %s\n",
                f.op.c_str(), f.site.c_str(), f.layer < 0 ? "model" : std::to_string(f.layer).c_str(), f.pass.c_str(),
                f.step, (long long)f.index, f.kind.c_str());
  s += line;
  std::snprintf(line, sizeof line, "  inputs %s -> outputs %s\n", f.inputs.c_str(), f.outputs.c_str());
  s += line;
  if (f.kind == "value" || f.kind == "nan") {
    std::snprintf(line, sizeof line, "  max_abs %.4g  max_rel %.4g  cosine %.8f\n", f.max_abs, f.max_rel, f.cosine);
    s += line;
  }
  if (!f.message.empty()) s += "  " + f.message + "\n";
  if (r.bisected) s += "  (confirmed by bisection over op prefixes, " + std::to_string(r.bisect_runs) + " runs)\n";
  return s;
}

}  // namespace dgemma

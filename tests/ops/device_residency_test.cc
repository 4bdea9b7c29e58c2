// The device-residency contract of ops/backend.h and core/tensor.h, with a
// fake device backend (no CUDA needed): the Executor lets a backend keep its
// outputs only when nobody observes; observers and host backends see current
// host data; host writes drop a device copy; ensure_host of several tensors
// waits once per device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "ops/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "ops/op.h"

namespace dgemma {
namespace {

// "Device memory" is a vector owned by the data; copies and waits are counted.
struct FakeDevice {
  int copies = 0, waits = 0, queued = 0;
};

class FakeData final : public DeviceData {
 public:
  FakeData(FakeDevice* dev, std::vector<float> v) : dev_(dev), v_(std::move(v)) {}
  const void* owner() const override { return dev_; }
  void copy_to_host(Tensor& t) const override {
    queue_copy_to_host(t);
    finish_copies();
  }
  void queue_copy_to_host(Tensor& t) const override {
    t.f = v_;
    ++dev_->copies;
    ++dev_->queued;
  }
  void finish_copies() const override {
    ++dev_->waits;
    dev_->queued = 0;
  }
  const std::vector<float>& values() const { return v_; }

 private:
  FakeDevice* dev_;
  std::vector<float> v_;
};

// Adds on its "device": reads inputs it holds without a copy, keeps outputs
// when the call allows it.
class FakeDeviceBackend final : public Backend {
 public:
  std::string name() const override { return "fake-device"; }
  bool supports_device_outputs() const override { return true; }
  void run(const OpCall& c) override {
    if (c.kind != OpKind::kAdd) throw Error("fake device: add only");
    ++runs;
    last_call_device_outputs = c.device_outputs;
    auto values = [&](const Tensor& t) {
      if (t.device && t.device->owner() == &dev) return static_cast<const FakeData&>(*t.device).values();
      t.ensure_host();
      ++uploads;
      return t.f;
    };
    const std::vector<float> a = values(*c.in[0]), b = values(*c.in[1]);
    std::vector<float> sum(a.size());
    for (size_t k = 0; k < a.size(); ++k) sum[k] = a[k] + b[k];
    Tensor& out = *c.out[0];
    out.device = std::make_shared<FakeData>(&dev, sum);
    out.host_stale = c.device_outputs;
    if (!c.device_outputs) out.f = sum;
  }
  FakeDevice dev;
  int runs = 0, uploads = 0;
  bool last_call_device_outputs = false;
};

struct Recorder : OpObserver {
  std::vector<float> seen;
  void on_op(const OpCall& c) override { seen = c.out[0]->f; }
};

OpCall add_call(const Tensor& a, const Tensor& b, Tensor& out) {
  OpCall c;
  c.kind = OpKind::kAdd;
  c.in = {&a, &b};
  c.out = {&out};
  return c;
}

TEST(DeviceResidency, OutputsStayOnTheDeviceOnlyWhenNobodyObserves) {
  FakeDeviceBackend gpu;
  Tensor a = Tensor::f32({3}), b = Tensor::f32({3}), x, y;
  a.f = {1, 2, 3};
  b.f = {10, 20, 30};
  Executor ex(gpu);
  ex.run(add_call(a, b, x));
  EXPECT_TRUE(gpu.last_call_device_outputs);
  EXPECT_TRUE(x.host_stale);
  EXPECT_EQ(gpu.uploads, 2);
  // The next op reads x where it is: no copy either way.
  ex.run(add_call(x, x, y));
  EXPECT_EQ(gpu.uploads, 2);
  EXPECT_EQ(gpu.dev.copies, 0);
  y.ensure_host();
  EXPECT_EQ(y.f, (std::vector<float>{22, 44, 66}));
  EXPECT_EQ(gpu.dev.copies, 1);
  EXPECT_EQ(gpu.dev.waits, 1);

  // With an observer: outputs come to the host and the observer sees them.
  Recorder rec;
  Executor watched(gpu, &rec);
  Tensor z;
  watched.run(add_call(a, b, z));
  EXPECT_FALSE(gpu.last_call_device_outputs);
  EXPECT_FALSE(z.host_stale);
  EXPECT_EQ(rec.seen, (std::vector<float>{11, 22, 33}));
}

TEST(DeviceResidency, HostBackendsAndHostWritersSeeCurrentData) {
  FakeDeviceBackend gpu;
  Tensor a = Tensor::f32({3}), b = Tensor::f32({3}), x, y;
  a.f = {1, 2, 3};
  b.f = {1, 1, 1};
  Executor(gpu).run(add_call(a, b, x));
  ASSERT_TRUE(x.host_stale);
  // The CPU backend takes a device tensor: it comes to the host first, and
  // its own output holds no device copy.
  CpuBackend cpu(1);
  y.device = std::make_shared<FakeData>(&gpu.dev, std::vector<float>{9, 9, 9});
  Executor(cpu).run(add_call(x, b, y));
  EXPECT_FALSE(x.host_stale);
  EXPECT_EQ(y.f, (std::vector<float>{3, 4, 5}));
  EXPECT_FALSE(y.device);
  // A host write drops the device copy, so a device backend uploads again.
  x.f[0] = 100;
  x.host_written();
  EXPECT_FALSE(x.device);
  const int uploads = gpu.uploads;
  Tensor z;
  Executor(gpu).run(add_call(x, b, z));
  EXPECT_EQ(gpu.uploads, uploads + 2);  // x and b: host data (this fake keeps no upload cache)
  z.ensure_host();
  EXPECT_EQ(z.f, (std::vector<float>{101, 4, 5}));
}

TEST(DeviceResidency, SeveralTensorsComeToTheHostWithOneWaitPerDevice) {
  FakeDevice d1, d2;
  Tensor a = Tensor::f32({2}), b = Tensor::f32({2}), c = Tensor::f32({2}), h = Tensor::f32({2});
  a.device = std::make_shared<FakeData>(&d1, std::vector<float>{1, 2});
  b.device = std::make_shared<FakeData>(&d1, std::vector<float>{3, 4});
  c.device = std::make_shared<FakeData>(&d2, std::vector<float>{5, 6});
  a.host_stale = b.host_stale = c.host_stale = true;
  h.f = {7, 8};
  ensure_host({&a, &b, &c, &h});
  EXPECT_EQ(a.f, (std::vector<float>{1, 2}));
  EXPECT_EQ(b.f, (std::vector<float>{3, 4}));
  EXPECT_EQ(c.f, (std::vector<float>{5, 6}));
  EXPECT_EQ(h.f, (std::vector<float>{7, 8}));
  EXPECT_EQ(d1.copies, 2);
  EXPECT_EQ(d1.waits, 1);
  EXPECT_EQ(d2.copies, 1);
  EXPECT_EQ(d2.waits, 1);
  EXPECT_FALSE(a.host_stale || b.host_stale || c.host_stale);
  // Current tensors cost nothing.
  ensure_host({&a, &b});
  EXPECT_EQ(d1.waits, 1);
  // A stale tensor without device data is an internal error, not garbage.
  Tensor broken = Tensor::f32({1});
  broken.host_stale = true;
  EXPECT_THROW(broken.ensure_host(), Error);
}

}  // namespace
}  // namespace dgemma

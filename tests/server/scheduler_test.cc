// Several sequences on one model (src/server/scheduler.h): each keeps its own
// KV cache although passes run on the shared model one at a time; the queue
// is bounded; cancelled and shut-down jobs never run.
#include "server/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "dgemma/error.h"
#include "generate/draws.h"
#include "generate/generate.h"
#include "server/metrics.h"

namespace dgemma::server {
namespace {

// A model whose "cache" is only its length, and whose logits depend on it:
// a sequence that ran with another's cache would see other logits.
class FakeModel final : public DiffusionModel {
 public:
  int64_t vocab_size() const override { return 8; }
  int64_t canvas_length() const override { return 4; }
  int64_t cache_length() const override { return cache.length; }
  void encode(const std::vector<int32_t>& ids) override {
    enter();
    cache.length += int64_t(ids.size());
    leave();
  }
  void decode(const int32_t* canvas, const float*, float* logits) override {
    enter();
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t v = 0; v < 8; ++v)
        logits[i * 8 + v] = v == (cache.length + i + canvas[i]) % 8 ? 4.0f : float(v) * 0.01f;
    logits[0] += float(cache.length) * 1e-3f;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    leave();
  }
  void truncate_cache(int64_t length) override { cache.length = length; }

  KvCache cache;
  std::atomic<bool> overlap{false};

 private:
  void enter() {
    if (busy_.exchange(true)) overlap = true;
  }
  void leave() { busy_ = false; }
  std::atomic<bool> busy_{false};
};

SharedModel share(FakeModel& m) {
  return SharedModel(
      m, [] { return KvCache{}; }, [&m](KvCache& c) { std::swap(m.cache, c); });
}

GenerationConfig config() {
  GenerationConfig c;
  c.max_new_tokens = 12;
  c.max_denoising_steps = 5;
  c.entropy_bound = 2.0;
  c.eos_token_ids = {100};  // never produced: every run uses all its canvases
  return c;
}

TEST(SharedModel, InterleavedSequencesMatchSerialRuns) {
  FakeModel direct;
  std::vector<std::vector<int32_t>> expected;
  for (int k = 0; k < 4; ++k) {
    direct.truncate_cache(0);
    RandomDraws draws{uint64_t(k)};
    expected.push_back(generate(direct, std::vector<int32_t>(size_t(3 + k), 1), config(), draws).sequences);
  }
  FakeModel model;
  SharedModel shared = share(model);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      SequenceModel seq(shared);
      for (int round = 0; round < 5; ++round) {
        seq.truncate_cache(0);
        RandomDraws draws{uint64_t(k)};
        got[size_t(k)] = generate(seq, std::vector<int32_t>(size_t(3 + k), 1), config(), draws).sequences;
        if (got[size_t(k)] != expected[size_t(k)]) return;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(model.overlap.load()) << "two passes ran on the model at once";
  EXPECT_EQ(model.cache.length, 0);  // every sequence took its cache back
  EXPECT_GT(shared.passes(), 100u);
}

// A job that runs until released (or cancelled).
struct BlockingJob final : Job {
  std::atomic<bool> release{false}, started{false}, finished{false}, was_dropped{false};
  void run(DiffusionModel& seq) override {
    started = true;
    seq.encode({1, 2, 3});
    while (!release && !cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    finished = true;
  }
  void dropped() override { was_dropped = true; }
};

template <class Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 5000 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return pred();
}

TEST(Scheduler, BoundedQueueAndCancellation) {
  FakeModel model;
  SharedModel shared = share(model);
  Metrics metrics;
  Scheduler s(shared, 1, 1, &metrics);
  auto a = std::make_shared<BlockingJob>(), b = std::make_shared<BlockingJob>(), c = std::make_shared<BlockingJob>();
  ASSERT_TRUE(s.submit(a));
  ASSERT_TRUE(eventually([&] { return a->started.load(); }));
  EXPECT_EQ(s.in_flight(), 1);
  ASSERT_TRUE(s.submit(b));
  EXPECT_EQ(s.queued(), 1);
  EXPECT_EQ(metrics.queued(), 1);
  EXPECT_FALSE(s.submit(c)) << "the queue holds one job";
  s.cancel(b);  // leaves the queue without running
  EXPECT_TRUE(b->was_dropped);
  EXPECT_EQ(s.queued(), 0);
  ASSERT_TRUE(s.submit(c));
  a->release = true;
  ASSERT_TRUE(eventually([&] { return c->started.load(); }));
  EXPECT_FALSE(b->started);
  s.cancel(c);  // a running job sees cancelled() and ends
  ASSERT_TRUE(eventually([&] { return c->finished.load() && s.in_flight() == 0; }));
  EXPECT_EQ(metrics.in_flight(), 0);
}

TEST(Scheduler, ShutdownCancelsRunningAndDropsQueuedJobs) {
  FakeModel model;
  SharedModel shared = share(model);
  Scheduler s(shared, 2, 8);
  std::vector<std::shared_ptr<BlockingJob>> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.push_back(std::make_shared<BlockingJob>());
    ASSERT_TRUE(s.submit(jobs.back()));
  }
  ASSERT_TRUE(eventually([&] { return jobs[0]->started && jobs[1]->started; }));
  s.shutdown();
  int ran = 0, dropped = 0;
  for (auto& j : jobs) {
    ran += j->finished ? 1 : 0;
    dropped += j->was_dropped ? 1 : 0;
  }
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(dropped, 3);
  EXPECT_FALSE(s.submit(std::make_shared<BlockingJob>()));
  EXPECT_THROW(Scheduler(shared, 0, 1), Error);
}

}  // namespace
}  // namespace dgemma::server

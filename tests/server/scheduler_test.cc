// Several sequences on one model (src/server/scheduler.h): each keeps its own
// KV cache although passes run on the shared model one at a time; the queue
// is bounded; cancelled and shut-down jobs never run.
#include "server/scheduler.h"
#include "cpu_model.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dgemma/error.h"
#include "generate/draws.h"
#include "generate/generate.h"
#include "model/diffusion_gemma.h"
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
    try {
      decode_with(cache, canvas, logits);
    } catch (...) {
      leave();
      throw;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pass_us.load()));
    leave();
  }
  void truncate_cache(int64_t length) override { cache.length = length; }

  // The batched pass: each request against its own cache, in one pass. A
  // canvas starting with a negative id fails the pass (and a single pass).
  void decode_batch(std::span<const SharedModel::DecodeRequest> requests) {
    enter();
    batch_sizes.push_back(requests.size());
    for (const auto& r : requests)
      if (r.canvas[0] < 0) {
        leave();
        throw Error("bad canvas");
      }
    for (const auto& r : requests) decode_with(*r.cache, r.canvas, r.logits);
    std::this_thread::sleep_for(std::chrono::microseconds(pass_us.load()));
    leave();
  }

  KvCache cache;
  std::atomic<bool> overlap{false};
  std::atomic<int> pass_us{200};
  std::vector<size_t> batch_sizes;  // written inside passes only

 private:
  static void decode_with(const KvCache& c, const int32_t* canvas, float* logits) {
    if (canvas[0] < 0) throw Error("bad canvas");
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t v = 0; v < 8; ++v) logits[i * 8 + v] = v == (c.length + i + canvas[i]) % 8 ? 4.0f : float(v) * 0.01f;
    logits[0] += float(c.length) * 1e-3f;
  }

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

// The same with batched decoder passes.
std::unique_ptr<SharedModel> share_batched(FakeModel& m, int max_batch = SharedModel::kDefaultMaxBatch) {
  return std::make_unique<SharedModel>(
      m, [] { return KvCache{}; }, [&m](KvCache& c) { std::swap(m.cache, c); },
      [&m](std::span<const SharedModel::DecodeRequest> r) { m.decode_batch(r); }, max_batch);
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

// Stops a generation before its decoder pass number `after` (counted over
// the whole generation), as a client that goes away would.
struct CancelAfter final : GenerationObserver {
  int64_t after, seen = 0;
  explicit CancelAfter(int64_t n) : after(n) {}
  bool cancelled() override { return seen++ >= after; }
};

// Sequences that start, end (after different numbers of canvases), get
// cancelled and re-encode between canvases at their own pace, with batched
// decoder passes: every sequence gets exactly its serial result, the model
// never runs two passes at once, nothing deadlocks, and passes are batched.
TEST(SharedModel, BatchedSequencesMatchSerialRuns) {
  const int kSeqs = 4;
  auto run_one = [](DiffusionModel& m, int k) {
    GenerationConfig c = config();
    c.max_new_tokens = 4 * (k + 1);  // 1..4 canvases: the sequences end at different times
    RandomDraws draws{uint64_t(k)};
    CancelAfter cancel(k == 2 ? 7 : 1000);  // sequence 2 is cancelled in its second canvas
    return generate(m, std::vector<int32_t>(size_t(3 + k), 1), c, draws, &cancel).sequences;
  };
  FakeModel direct;
  std::vector<std::vector<int32_t>> expected;
  for (int k = 0; k < kSeqs; ++k) {
    direct.truncate_cache(0);
    expected.push_back(run_one(direct, k));
  }
  FakeModel model;
  auto shared = share_batched(model);
  std::vector<std::vector<int32_t>> got(kSeqs);
  std::vector<std::thread> threads;
  for (int k = 0; k < kSeqs; ++k)
    threads.emplace_back([&, k] {
      SequenceModel seq(*shared);
      for (int round = 0; round < 5; ++round) {
        seq.truncate_cache(0);
        got[size_t(k)] = run_one(seq, k);
        if (got[size_t(k)] != expected[size_t(k)]) return;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(model.overlap.load()) << "two passes ran on the model at once";
  EXPECT_EQ(model.cache.length, 0);
  EXPECT_GT(shared->decode_calls(), 100u);
  EXPECT_LT(shared->decoder_passes(), shared->decode_calls()) << "no decoder pass was batched";
  size_t largest = 0;
  for (const size_t n : model.batch_sizes) largest = std::max(largest, n);
  EXPECT_GE(largest, 2u);
  EXPECT_LE(largest, size_t(kSeqs));
}

TEST(SharedModel, BatchesHoldAtMostMaxBatchSequences) {
  FakeModel model;
  auto shared = share_batched(model, 2);
  std::vector<std::thread> threads;
  for (int k = 0; k < 5; ++k)
    threads.emplace_back([&, k] {
      SequenceModel seq(*shared);
      RandomDraws draws{uint64_t(k)};
      generate(seq, {1, 2}, config(), draws);
    });
  for (auto& t : threads) t.join();
  for (const size_t n : model.batch_sizes) EXPECT_LE(n, 2u);
  EXPECT_FALSE(model.overlap.load());
  EXPECT_THROW(share_batched(model, 0), Error);
}

// A sequence between two decoder passes that stalls (its thread busy
// elsewhere) holds a batch up for at most about one pass, not until it
// returns: the other sequence finishes its whole generation meanwhile.
TEST(SharedModel, AStalledSequenceDoesNotBlockTheOthers) {
  FakeModel model;
  auto shared = share_batched(model);
  std::atomic<bool> resumed{false}, other_done{false};
  std::vector<float> logits(32);
  const std::vector<int32_t> canvas = {1, 2, 3, 4};
  std::thread stalled([&] {
    SequenceModel seq(*shared);
    seq.decode(canvas.data(), nullptr, logits.data());  // now expected by the next batch
    for (int i = 0; i < 3000 && !other_done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    resumed = true;
    seq.decode(canvas.data(), nullptr, logits.data());
  });
  while (shared->decoder_passes() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    SequenceModel seq(*shared);
    RandomDraws draws{1};
    GenerationConfig c = config();
    c.max_new_tokens = 16;
    generate(seq, {1, 2, 3}, c, draws);
    EXPECT_FALSE(resumed.load()) << "the generation waited for the stalled sequence";
    other_done = true;
  }
  stalled.join();
}

// When a batched pass fails, each of its requests runs alone: the error
// reaches only the request that caused it, the others get their logits.
TEST(SharedModel, AFailedBatchFailsOnlyTheBadRequest) {
  FakeModel model;
  auto shared = share_batched(model);
  model.pass_us = 500000;  // the next batch waits up to this long for a sequence it expects
  SequenceModel a(*shared), b(*shared);
  a.encode({1, 2});
  b.encode({1, 2, 3});
  const std::vector<int32_t> good = {1, 2, 3, 4}, bad = {-1, 2, 3, 4};
  std::vector<float> la(32), lb(32), want(32);
  a.decode(good.data(), nullptr, la.data());  // alone; a is now expected by the next batch
  std::thread tb([&] { b.decode(good.data(), nullptr, lb.data()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_THROW(a.decode(bad.data(), nullptr, la.data()), Error);
  tb.join();
  ASSERT_FALSE(model.batch_sizes.empty());
  EXPECT_EQ(model.batch_sizes.back(), 2u) << "the two requests were not batched";
  model.truncate_cache(3);
  model.decode(good.data(), nullptr, want.data());
  model.truncate_cache(0);
  EXPECT_EQ(lb, want);
  EXPECT_EQ(a.cache_length(), 2);
  EXPECT_EQ(b.cache_length(), 3);
}

// On the real model (golden_a): three sequences generated concurrently with
// batched decoder passes give every step's logits bit for bit as when each
// runs alone, with fewer decoder passes than steps — with the sampler pass
// in the batched pass (the sequences' decode_sample(), z kept per sequence)
// and with it on each sequence's thread over host logits.
class SharedModelPaths : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(SamplerPass, SharedModelPaths, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "in_the_batch" : "on_the_host"; });

TEST_P(SharedModelPaths, BatchedPassesOfTheRealModelAreBitIdentical) {
  struct Steps final : GenerationObserver {
    std::vector<std::vector<float>> logits;
    int64_t vocab = 0;
    bool wants_processed_logits(const StepEvent&) override { return true; }
    void on_step(const StepEvent& e) override {
      logits.emplace_back(e.processed_logits, e.processed_logits + e.canvas_in.size() * size_t(vocab));
    }
  };
  ModelOptions o;
  o.load_threads = 2;
  auto model = test::load_on_cpu(std::string(DGEMMA_TEST_DATA) + "/golden_a", o);
  GenerationConfig c;
  c.max_new_tokens = 40;  // 3 canvases of 16
  c.max_denoising_steps = 6;
  c.entropy_bound = 2.0;
  c.eos_token_ids = {1};
  const int lengths[3] = {5, 23, 40};  // two cross the sliding window (16)
  auto prompt = [&](int k) {
    std::vector<int32_t> p(size_t(lengths[k]));
    for (size_t i = 0; i < p.size(); ++i) p[i] = int32_t((i * 37 + 11 + size_t(k)) % 509) + 2;
    return p;
  };
  struct Result {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;
  };
  auto run_one = [&](DiffusionModel& m, int k) {
    Steps steps;
    steps.vocab = model->vocab_size();
    RandomDraws draws{uint64_t(10 + k)};
    Result r;
    r.tokens = generate(m, prompt(k), c, draws, &steps).sequences;
    r.logits = std::move(steps.logits);
    return r;
  };
  std::vector<Result> alone;
  for (int k = 0; k < 3; ++k) {
    model->truncate_cache(0);
    alone.push_back(run_one(*model, k));
  }
  model->truncate_cache(0);
  SharedModel shared(*model, SharedModel::kDefaultMaxBatch, GetParam());
  ASSERT_TRUE(shared.batching());
  ASSERT_EQ(shared.samples_rows(), GetParam());
  ASSERT_EQ(SequenceModel(shared).samples_rows(), GetParam());
  std::vector<Result> together(3);
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k)
    threads.emplace_back([&, k] {
      SequenceModel seq(shared);
      together[size_t(k)] = run_one(seq, k);
    });
  for (auto& t : threads) t.join();
  uint64_t steps = 0;
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(together[size_t(k)].tokens, alone[size_t(k)].tokens) << "sequence " << k;
    ASSERT_EQ(together[size_t(k)].logits.size(), alone[size_t(k)].logits.size()) << "sequence " << k;
    for (size_t s = 0; s < alone[size_t(k)].logits.size(); ++s)
      EXPECT_EQ(together[size_t(k)].logits[s], alone[size_t(k)].logits[s]) << "sequence " << k << " step " << s;
    steps += alone[size_t(k)].logits.size();
  }
  EXPECT_EQ(shared.decode_calls(), steps);
  EXPECT_LT(shared.decoder_passes(), shared.decode_calls()) << "no decoder pass was batched";
  EXPECT_EQ(model->cache_length(), 0);
  if (GetParam()) {  // a sequence's z lives until its generation ends
    SequenceModel seq(shared);
    std::vector<float> z(static_cast<size_t>(model->canvas_length() * model->vocab_size()));
    EXPECT_THROW(seq.processed_logits(z.data()), Error);
    run_one(seq, 0);
    seq.processed_logits(z.data());
    seq.idle();
    EXPECT_THROW(seq.processed_logits(z.data()), Error);
    std::vector<int32_t> canvas(static_cast<size_t>(model->canvas_length()), 3);
    RowSamples rs;
    EXPECT_THROW(seq.decode_sample(canvas.data(), true, 1.0f, nullptr, rs), Error);
    seq.truncate_cache(0);
  }
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

// Fibers and barriers of the emulated CUDA device (grid_runner.h).
//
// Context switches: on x86-64 a few instructions that save the callee-saved
// registers and the stack pointer (the System V ABI leaves everything else to
// the caller), elsewhere ucontext. AddressSanitizer is told about every stack
// switch (__sanitizer_start/finish_switch_fiber), so that it keeps checking
// the kernels' stack and heap accesses on the fiber stacks.
#include "cuda_emulator/grid_runner.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define DGEMMA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DGEMMA_EMU_ASAN 1
#endif
#endif
#if DGEMMA_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
// void dgemma_emu_switch(void** save_sp, void* load_sp): pushes the
// callee-saved registers, stores the stack pointer in *save_sp, loads load_sp
// and pops the same frame from there. A new fiber's stack is prepared with
// such a frame whose return address is the fiber's entry function (see
// prepare). The SSE and x87 control words are callee-saved too, but nothing
// here changes them, so they are left alone (saving them doubled the cost of
// a switch).
asm(R"(
  .text
  .globl dgemma_emu_switch
  .type dgemma_emu_switch, @function
dgemma_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size dgemma_emu_switch, .-dgemma_emu_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");
extern "C" void dgemma_emu_switch(void** save_sp, void* load_sp);
#endif

namespace dgemma::cuda_emu {
namespace {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxBlockThreads = 1024;
// Kernel frames are small; sanitizer builds make them several times larger.
constexpr size_t kStackBytes = size_t(256) << 10;

enum class State : uint8_t { kRunnable, kAtBlockBarrier, kAtWarpBarrier, kDone, kFaulted };

// One mmap'ed stack with a guard page below it (an overflow faults instead
// of corrupting the neighbouring fiber).
struct Stack {
  char* base = nullptr;  // guard page
  size_t total = 0;
  Stack() {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    total = kStackBytes + page;
    void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "dgemma CUDA emulator: cannot map a %zu-byte fiber stack: %s\n", total,
                   std::strerror(errno));
      std::abort();
    }
    base = static_cast<char*>(p);
    mprotect(base, page, PROT_NONE);
  }
  ~Stack() { munmap(base, total); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  char* bottom() const { return base + (total - kStackBytes); }
  char* top() const { return base + total; }
};

struct EmuThread {
  ThreadContext ctx;
  unsigned index = 0, warp = 0, lane = 0;
  State state = State::kRunnable;
  unsigned wait_mask = 0;  // lanes of the warp barrier it waits at
  unsigned exchanges = 0;  // whole-warp exchanges done (their parity picks the slot generation)
  Stack* stack = nullptr;
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc{};
#endif
  void* asan_fake_stack = nullptr;
};

// Per OS thread: the block being run and the stacks, kept across launches.
struct Runner {
  std::vector<std::unique_ptr<Stack>> stacks;
  std::vector<EmuThread> threads;
  // Warp exchange among all lanes of a warp (the common case): two
  // generations of one slot per thread, used alternately, so that a lane can
  // publish its next value without waiting for the others to read this one
  // (no lane passes the barrier of the next exchange before every lane read
  // this one). Every lane takes part in every such exchange, so their
  // counters agree. Exchanges among part of a warp use `partial_slots` and a
  // second barrier instead.
  std::vector<uint64_t> slots[2];
  std::vector<uint64_t> partial_slots;
  const std::function<void()>* body = nullptr;
  EmuThread* current = nullptr;
  std::vector<unsigned char> dynamic_shared;  // 256 bytes of slack for the alignment
  size_t dynamic_shared_bytes = 0;
  unsigned char* dynamic_shared_base() {
    const auto at = reinterpret_cast<uintptr_t>(dynamic_shared.data());
    return dynamic_shared.data() + ((256 - at % 256) % 256);
  }
  std::string fault;       // of the running launch
  std::string last_fault;  // of the last failed launch
#if defined(__x86_64__)
  void* main_sp = nullptr;
#else
  ucontext_t main_uc{};
#endif
  void* main_fake_stack = nullptr;
  const void* main_stack_bottom = nullptr;
  size_t main_stack_size = 0;
};

thread_local Runner t_runner;
thread_local const ThreadContext* t_context = nullptr;

void asan_start(void** fake_save, const void* bottom, size_t size) {
#if DGEMMA_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_save, bottom, size);
#else
  (void)fake_save, (void)bottom, (void)size;
#endif
}

void asan_finish(void* fake, const void** old_bottom, size_t* old_size) {
#if DGEMMA_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, old_bottom, old_size);
#else
  (void)fake, (void)old_bottom, (void)old_size;
#endif
}

// From the running fiber back to the runner. `exiting`: the fiber is never
// resumed (AddressSanitizer frees its fake stack).
void to_runner(EmuThread& t, bool exiting) {
  Runner& r = t_runner;
  asan_start(exiting ? nullptr : &t.asan_fake_stack, r.main_stack_bottom, r.main_stack_size);
#if defined(__x86_64__)
  dgemma_emu_switch(&t.sp, r.main_sp);
#else
  swapcontext(&t.uc, &r.main_uc);
#endif
  asan_finish(t.asan_fake_stack, &r.main_stack_bottom, &r.main_stack_size);
  t_context = &t.ctx;
}

std::string thread_text(const EmuThread& t);

// Thrown by thread_fault and caught at the bottom of the fiber, so that the
// faulting thread's frames are unwound. (The other threads of a faulted block
// are abandoned where they wait: their frames hold no heap objects.)
struct ThreadFault {};

[[noreturn]] void fiber_entry() {
  Runner& r = t_runner;
  asan_finish(nullptr, &r.main_stack_bottom, &r.main_stack_size);
  EmuThread& t = *r.current;
  t_context = &t.ctx;
  try {
    (*r.body)();
    t.state = State::kDone;
  } catch (const ThreadFault&) {
    t.state = State::kFaulted;
  } catch (...) {  // nothing may unwind past this frame (it has no caller)
    r.fault = thread_text(t) + ": an exception escaped the kernel";
    t.state = State::kFaulted;
  }
  to_runner(t, true);
  std::abort();  // a finished fiber is never resumed
}

#if !defined(__x86_64__)
void fiber_entry_uc() { fiber_entry(); }
#endif

// Sets up a fresh fiber on its stack, to start in fiber_entry.
void prepare(EmuThread& t) {
  t.asan_fake_stack = nullptr;
#if DGEMMA_EMU_ASAN
  // The stack is reused: the frames of its last fiber never returned (a fiber
  // ends by switching away), so their redzones are still poisoned.
  ASAN_UNPOISON_MEMORY_REGION(t.stack->bottom(), kStackBytes);
#endif
#if defined(__x86_64__)
  // From the top (16-byte aligned): a null return address for fiber_entry
  // (so that it starts with the stack alignment of a called function), the
  // address `ret` jumps to, and six callee-saved registers.
  auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(t.stack->top()) & ~uintptr_t(15));
  uint64_t* sp = top - 8;
  for (int i = 0; i < 6; ++i) sp[i] = 0;
  sp[6] = reinterpret_cast<uint64_t>(&fiber_entry);
  sp[7] = 0;
  t.sp = sp;
#else
  getcontext(&t.uc);
  t.uc.uc_stack.ss_sp = t.stack->bottom();
  t.uc.uc_stack.ss_size = kStackBytes;
  t.uc.uc_link = nullptr;
  makecontext(&t.uc, fiber_entry_uc, 0);
#endif
}

void resume(EmuThread& t) {
  Runner& r = t_runner;
  r.current = &t;
  asan_start(&r.main_fake_stack, t.stack->bottom(), kStackBytes);
#if defined(__x86_64__)
  dgemma_emu_switch(&r.main_sp, t.sp);
#else
  swapcontext(&r.main_uc, &t.uc);
#endif
  asan_finish(r.main_fake_stack, nullptr, nullptr);
  r.current = nullptr;
  t_context = nullptr;
}

std::string dim_text(const uint3& d) {
  char b[48];
  std::snprintf(b, sizeof b, "(%u,%u,%u)", d.x, d.y, d.z);
  return b;
}

std::string thread_text(const EmuThread& t) {
  return "thread " + dim_text(t.ctx.thread_idx) + " of block " + dim_text(t.ctx.block_idx);
}

// Releases the threads waiting at a barrier that every participant reached.
// False when nothing can move (a deadlock).
bool release_barriers(std::vector<EmuThread>& threads, std::string* why) {
  size_t live = 0, at_block = 0;
  for (const EmuThread& t : threads) {
    if (t.state == State::kDone) continue;
    ++live;
    at_block += t.state == State::kAtBlockBarrier;
  }
  if (live > 0 && at_block == live) {
    for (EmuThread& t : threads)
      if (t.state == State::kAtBlockBarrier) t.state = State::kRunnable;
    return true;
  }
  bool released = false;
  for (size_t w0 = 0; w0 < threads.size(); w0 += kWarpSize) {
    const size_t w1 = std::min(threads.size(), w0 + kWarpSize);
    for (size_t i = w0; i < w1; ++i) {
      const EmuThread& t = threads[i];
      if (t.state != State::kAtWarpBarrier) continue;
      // Every lane of its mask must be waiting at a warp barrier with the same
      // mask (not in another shuffle); a lane that has exited never will.
      bool ready = true;
      for (unsigned l = 0; l < kWarpSize && ready; ++l) {
        if (!(t.wait_mask >> l & 1u)) continue;
        const size_t j = w0 + l;
        if (j >= w1 || threads[j].state == State::kDone) {
          char mask[16];
          std::snprintf(mask, sizeof mask, "0x%08x", t.wait_mask);
          *why = thread_text(t) + ": warp shuffle with mask " + mask + " names lane " + std::to_string(l) +
                 (j >= w1 ? ", which the block does not have" : ", which has exited");
          return false;
        }
        ready = threads[j].state == State::kAtWarpBarrier && threads[j].wait_mask == t.wait_mask;
      }
      if (!ready) continue;
      for (unsigned l = 0; l < kWarpSize; ++l)
        if (t.wait_mask >> l & 1u) threads[w0 + l].state = State::kRunnable;
      released = true;
    }
  }
  if (released) return true;
  // Deadlock: say who waits where.
  size_t at_warp = 0;
  const EmuThread* first_block = nullptr;
  const EmuThread* first_warp = nullptr;
  for (const EmuThread& t : threads) {
    if (t.state == State::kAtBlockBarrier && !first_block) first_block = &t;
    if (t.state == State::kAtWarpBarrier) {
      ++at_warp;
      if (!first_warp) first_warp = &t;
    }
  }
  *why = "deadlock: " + std::to_string(at_block) + " of " + std::to_string(live) +
         " live threads wait at __syncthreads, " + std::to_string(at_warp) + " in a warp shuffle";
  if (first_block) *why += "; first at __syncthreads: " + thread_text(*first_block);
  if (first_warp) {
    char mask[16];
    std::snprintf(mask, sizeof mask, "0x%08x", first_warp->wait_mask);
    *why += "; first in a shuffle: " + thread_text(*first_warp) + " with mask " + mask;
  }
  return false;
}

std::string run_block(Runner& r, const uint3& block_idx, dim3 grid, dim3 block) {
  const unsigned n = block.x * block.y * block.z;
  if (r.dynamic_shared_bytes) std::memset(r.dynamic_shared_base(), 0xFF, r.dynamic_shared_bytes);
  while (r.stacks.size() < n) r.stacks.push_back(std::make_unique<Stack>());
  r.threads.assign(n, EmuThread{});
  r.slots[0].assign(n, 0);
  r.slots[1].assign(n, 0);
  r.partial_slots.assign(n, 0);
  for (unsigned i = 0; i < n; ++i) {
    EmuThread& t = r.threads[i];
    t.index = i;
    t.warp = i / kWarpSize;
    t.lane = i % kWarpSize;
    t.ctx.thread_idx = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
    t.ctx.block_idx = block_idx;
    t.ctx.block_dim = block;
    t.ctx.grid_dim = grid;
    t.stack = r.stacks[i].get();
    prepare(t);
  }
  for (;;) {
    bool faulted = false;
    for (EmuThread& t : r.threads) {
      if (t.state != State::kRunnable) continue;
      resume(t);
      if (t.state == State::kFaulted) {
        faulted = true;
        break;
      }
    }
    if (faulted) return r.fault;
    bool all_done = true;
    for (const EmuThread& t : r.threads) all_done &= t.state == State::kDone;
    if (all_done) return "";
    // Every thread ran until it blocked or ended: release a barrier or stop.
    std::string why;
    if (!release_barriers(r.threads, &why)) return why;
  }
}

}  // namespace

const ThreadContext* current_context() { return t_context; }

void* dynamic_shared() {
  Runner& r = t_runner;
  return r.dynamic_shared_bytes ? r.dynamic_shared_base() : nullptr;
}

std::string run_grid(const char* kernel, dim3 grid, dim3 block, const std::function<void()>& body,
                     size_t dynamic_shared_bytes) {
  Runner& r = t_runner;
  if (r.body) return std::string("kernel ") + kernel + " launched from inside a kernel (not supported by the emulator)";
  const unsigned n = block.x * block.y * block.z;
  if (n == 0 || n > kMaxBlockThreads)
    return std::string("kernel ") + kernel + ": block of " + std::to_string(n) + " threads";
  r.body = &body;
  r.fault.clear();
  r.dynamic_shared_bytes = dynamic_shared_bytes;
  if (dynamic_shared_bytes + 256 > r.dynamic_shared.size()) r.dynamic_shared.resize(dynamic_shared_bytes + 256);
  std::string fault;
  for (unsigned z = 0; z < grid.z && fault.empty(); ++z)
    for (unsigned y = 0; y < grid.y && fault.empty(); ++y)
      for (unsigned x = 0; x < grid.x && fault.empty(); ++x) fault = run_block(r, uint3{x, y, z}, grid, block);
  r.body = nullptr;
  r.threads.clear();
  r.dynamic_shared_bytes = 0;
  if (!fault.empty()) {
    fault = std::string("kernel ") + kernel + " (grid " + dim_text(uint3{grid.x, grid.y, grid.z}) + ", block " +
            dim_text(uint3{block.x, block.y, block.z}) + "): " + fault;
    r.last_fault = fault;
  }
  return fault;
}

void sync_block() {
  Runner& r = t_runner;
  EmuThread& t = *r.current;
  t.state = State::kAtBlockBarrier;
  to_runner(t, false);
}

uint64_t warp_exchange(unsigned mask, uint64_t bits, unsigned src_lane) {
  Runner& r = t_runner;
  EmuThread& t = *r.current;
  if (!(mask >> t.lane & 1u)) {
    char m[16];
    std::snprintf(m, sizeof m, "0x%08x", mask);
    thread_fault("warp shuffle with mask " + std::string(m) + " that leaves out the calling lane " +
                 std::to_string(t.lane));
  }
  // Lanes of the mask that exited (or do not exist) are found by the runner
  // when it tries to release the barrier.
  const size_t w0 = size_t(t.warp) * kWarpSize;
  const size_t lanes = std::min<size_t>(kWarpSize, r.threads.size() - w0);
  const unsigned all = lanes == kWarpSize ? ~0u : (1u << lanes) - 1u;
  const bool whole_warp = (mask & all) == all;
  std::vector<uint64_t>& slot = whole_warp ? r.slots[t.exchanges++ & 1u] : r.partial_slots;
  slot[t.index] = bits;
  t.wait_mask = mask;
  t.state = State::kAtWarpBarrier;
  to_runner(t, false);
  // Reading a lane outside the mask is undefined on a GPU; here it reads the
  // caller's own value.
  const uint64_t got = (src_lane < kWarpSize && (mask >> src_lane & 1u)) ? slot[w0 + src_lane] : bits;
  if (!whole_warp) {  // the slots are reused by the next partial exchange: wait until all read
    t.state = State::kAtWarpBarrier;
    to_runner(t, false);
  }
  return got;
}

void thread_fault(const std::string& what) {
  Runner& r = t_runner;
  EmuThread& t = *r.current;
  r.fault = thread_text(t) + ": " + what;
  throw ThreadFault{};
}

std::string last_fault() { return t_runner.last_fault; }

}  // namespace dgemma::cuda_emu

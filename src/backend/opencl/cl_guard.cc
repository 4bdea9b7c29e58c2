#include "backend/opencl/cl_guard.h"

#include <vector>

#include "backend/opencl/cl_runtime.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

namespace {

void fill(ClRuntime& rt, cl_mem m, uint32_t word, size_t offset, size_t bytes, const std::string& what) {
  cl_check(clEnqueueFillBuffer(rt.queue(), m, &word, sizeof word, offset, bytes, 0, nullptr, nullptr),
           "clEnqueueFillBuffer", what + " (debug: guard zones)");
}

// The first and last byte of `zone` (read from the device) that differ from
// the canary, as "bytes A..B"; "" when none does.
std::string damaged(const std::vector<uint32_t>& zone, size_t base, bool after) {
  size_t first = zone.size(), last = 0;
  for (size_t k = 0; k < zone.size(); ++k)
    if (zone[k] != kGuardWord) {
      first = std::min(first, k);
      last = k;
    }
  if (first == zone.size()) return "";
  // Offsets counted from the buffer's edge: after it from its end, before it
  // back from its start.
  const size_t a = after ? first * 4 : base - (last + 1) * 4;
  const size_t b = after ? last * 4 + 3 : base - first * 4 - 1;
  return "bytes " + std::to_string(a) + ".." + std::to_string(b);
}

}  // namespace

GuardedBuffer alloc_guarded(ClRuntime& rt, size_t bytes, bool poison, const std::string& what) {
  if (bytes == 0 || bytes % 4 != 0)
    throw Error("opencl backend: internal: guarded " + what + " of " + std::to_string(bytes) + " bytes");
  GuardedBuffer b;
  b.bytes = bytes;
  b.guard = rt.guard_bytes();
  b.parent = rt.alloc(b.guard + bytes + b.guard, what);
  try {
    fill(rt, b.parent, kGuardWord, 0, b.guard + bytes + b.guard, what);
    if (poison) fill(rt, b.parent, 0xFFFFFFFFu, b.guard, bytes, what);
    cl_buffer_region region{b.guard, bytes};
    cl_int e = CL_SUCCESS;
    b.mem = clCreateSubBuffer(b.parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &e);
    cl_check(e, "clCreateSubBuffer", what + " (debug: guard zones)");
  } catch (...) {
    clReleaseMemObject(b.parent);
    throw;
  }
  return b;
}

std::string check_guards(ClRuntime& rt, const GuardedBuffer& b, const std::string& what) {
  std::vector<uint32_t> before(b.guard / 4), after(b.guard / 4);
  rt.read_at(before.data(), b.parent, 0, b.guard, what + " (debug: checking the guard zones)");
  rt.read_at(after.data(), b.parent, b.guard + b.bytes, b.guard, what + " (debug: checking the guard zones)");
  std::string s;
  const std::string past = damaged(after, b.guard, true);
  if (!past.empty()) s = "past the end of " + what + " (" + past + " after it overwritten)";
  const std::string ahead = damaged(before, b.guard, false);
  if (!ahead.empty())
    s += std::string(s.empty() ? "" : ", and ") + "before the start of " + what + " (" + ahead +
         " before it overwritten)";
  return s;
}

}  // namespace dgemma::opencl

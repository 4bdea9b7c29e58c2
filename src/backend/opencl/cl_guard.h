#pragma once
// The debug mode's guarded buffers (docs/opencl.md §4): a buffer of `bytes`
// bytes is a sub-buffer in the middle of a larger one, with a guard zone
// before and after it filled with a canary word. After the op, the zones are
// read back; a zone that no longer holds the canary means a kernel wrote
// before the start or past the end of that buffer. Fresh outputs are filled
// with 0xFF bytes (NaN as fp32, -1 as int32), so that an element no kernel
// wrote shows up instead of reading as a plausible zero.
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/opencl/cl_api.h"

namespace dgemma::opencl {

class ClRuntime;

// The word the guard zones hold (not a value kernels produce by chance: a
// tiny negative denormal as fp32).
inline constexpr uint32_t kGuardWord = 0x80A5CA11u;

struct GuardedBuffer {
  cl_mem parent = nullptr;  // guard + bytes + guard
  cl_mem mem = nullptr;     // the usable part, a sub-buffer of parent
  size_t bytes = 0;
  size_t guard = 0;  // bytes of each zone
};

// Allocates a guarded buffer of `bytes` (> 0, a multiple of 4) bytes, with
// zones of ClRuntime::guard_bytes() each: the zones hold kGuardWord, the usable part 0xFF bytes when `poison`, else is
// left as it comes. `what` names the buffer and its op in errors.
GuardedBuffer alloc_guarded(ClRuntime& runtime, size_t bytes, bool poison, const std::string& what);

// "" when both zones still hold the canary; otherwise which zone was
// overwritten and where ("past its end: bytes 0..3 after it").
std::string check_guards(ClRuntime& runtime, const GuardedBuffer& b, const std::string& what);

}  // namespace dgemma::opencl

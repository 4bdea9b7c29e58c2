#include "quantize/page_release.h"

#include <sys/mman.h>
#include <unistd.h>

namespace dgemma {

void release_mapped_pages(const void* data, uint64_t nbytes) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(data) + page - 1) / page * page;
  const uintptr_t end = (uintptr_t(data) + nbytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace dgemma

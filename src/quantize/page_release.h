#pragma once
// Hands the whole pages inside a range of a read-only file mapping back to
// the kernel (madvise MADV_DONTNEED): they are read again from the file if
// touched later. Used after a mapped tensor has been quantized (at load or by
// the exporter) so that resident memory holds the output, not the input.
// Only for PROT_READ file mappings (TensorStore's): on anonymous memory it
// would discard data.
#include <cstdint>

namespace dgemma {

void release_mapped_pages(const void* data, uint64_t nbytes);

}  // namespace dgemma

// libFuzzer target: the input is a whole JPEG file (fuzz/corpus/image_jpeg holds
// the seeds), decoded as fuzz/decode_image_target.h says.
#include <cstddef>
#include <cstdint>

#include "decode_image_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz_decode_image(data, size); }

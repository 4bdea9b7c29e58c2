#include "backend/cpu/blas_baseline.h"

#include <dlfcn.h>

namespace dgemma::cpu {
namespace {

// CBLAS enum values (cblas.h): row major, no transpose, transpose.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

}  // namespace

std::unique_ptr<BlasBaseline> BlasBaseline::open() {
  for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
    void* h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) continue;
    auto sgemm = reinterpret_cast<Sgemm>(::dlsym(h, "cblas_sgemm"));
    if (sgemm == nullptr) {
      ::dlclose(h);
      continue;
    }
    std::unique_ptr<BlasBaseline> b(new BlasBaseline());
    b->handle_ = h;
    b->library_ = name;
    b->sgemm_ = sgemm;
    b->set_threads_ = reinterpret_cast<void (*)(int)>(::dlsym(h, "openblas_set_num_threads"));
    b->get_config_ = reinterpret_cast<char* (*)()>(::dlsym(h, "openblas_get_config"));
    return b;
  }
  return nullptr;
}

BlasBaseline::~BlasBaseline() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

void BlasBaseline::sgemm_nt(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) const {
  sgemm_(kRowMajor, kNoTrans, kTrans, int(m), int(n), int(k), 1.0f, a, int(k), b, int(k), 0.0f, c, int(n));
}

void BlasBaseline::set_threads(int threads) const {
  if (set_threads_ != nullptr) set_threads_(threads);
}

std::string BlasBaseline::config() const { return get_config_ != nullptr ? std::string(get_config_()) : ""; }

}  // namespace dgemma::cpu

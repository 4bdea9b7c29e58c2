#include "ops/row_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "dgemma/error.h"

namespace dgemma {

namespace {

// NaN is "nan" whatever its sign bit (a device may change it).
std::string bad_row_reason(int64_t logit, float value) {
  if (logit < 0) return "every logit is -inf";
  return std::string("logit ") + std::to_string(logit) + " is " +
         (std::isnan(value) ? std::string("nan") : std::to_string(value));
}

std::string bad_row_message(const std::string& where, int64_t row, int64_t logit, float value) {
  std::string m = where;
  if (row >= 0) {
    m += " row ";
    m += std::to_string(row);
  }
  return m + ": " + bad_row_reason(logit, value);
}

}  // namespace

BadLogitsRow::BadLogitsRow(const std::string& where, int64_t row, int64_t logit, float value)
    : Error(bad_row_message(where, row, logit, value)), row_(row), logit_(logit), value_(value) {}

std::string BadLogitsRow::reason() const { return bad_row_reason(logit_, value_); }

void throw_marked_row(std::span<const int32_t> argmax, const float* z, int64_t vocab, const std::string& where) {
  for (size_t r = 0; r < argmax.size(); ++r) {
    const int32_t a = argmax[r];
    if (a >= 0) continue;
    const int64_t logit = a == -1 ? -1 : -2 - int64_t(a);
    if (logit >= vocab) throw Error(where + " row " + std::to_string(r) + ": invalid mark " + std::to_string(a));
    const float value = logit < 0 ? -std::numeric_limits<float>::infinity() : z[int64_t(r) * vocab + logit];
    throw BadLogitsRow(where, int64_t(r), logit, value);
  }
}

std::string sample_op_where(std::string_view site, int step) {
  std::string s = "op sample";
  if (!site.empty()) {
    s += " (";
    s += site;
    s += ")";
  }
  s += ", decoder pass, step ";
  s += std::to_string(step);
  return s;
}

void apply_temperature(std::span<float> logits, float temperature) {
  for (float& x : logits) x = x / temperature;
}

namespace {

// First maximum of a row of logits; NaN and +inf are errors.
float row_max(const float* z, size_t n, int32_t& argmax, const char* where) {
  float max_z = -std::numeric_limits<float>::infinity();
  for (size_t v = 0; v < n; ++v) {
    const float x = z[v];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity()) throw BadLogitsRow(where, -1, int64_t(v), x);
    if (x > max_z) {
      max_z = x;
      argmax = int32_t(v);
    }
  }
  if (max_z == -std::numeric_limits<float>::infinity()) throw BadLogitsRow(where, -1, -1, max_z);
  return max_z;
}

// Entropy in nats from S = sum e and sum e·d, d = z - max z (see row_stats).
float entropy_of(double sum_e, double sum_ed) { return float(std::log(sum_e) - sum_ed / sum_e); }

}  // namespace

RowStats row_stats(std::span<const float> z, const char* where) {
  RowStats out;
  const float max_z = row_max(z.data(), z.size(), out.argmax, where);
  double sum_e = 0.0, sum_ed = 0.0;
  for (const float x : z) {
    const float d = x - max_z;  // <= 0; -inf for masked tokens
    const float e = std::exp(d);
    if (e > 0.0f) {  // skip 0 * -inf
      sum_e += double(e);
      sum_ed += double(e) * double(d);
    }
  }
  out.entropy = entropy_of(sum_e, sum_ed);
  return out;
}

int32_t inverse_cdf(const float* p, size_t n, double target) {
  double cdf = 0.0;
  int32_t last_positive = -1;
  for (size_t v = 0; v < n; ++v) {
    if (p[v] <= 0.0f) continue;
    cdf += double(p[v]);
    last_positive = int32_t(v);
    if (cdf > target) return int32_t(v);
  }
  return last_positive;  // target fell in the rounding slack of the last bin
}

RowPass process_row(float* row, size_t vocab, float temperature, const double* uniform, float* scratch,
                    const char* where, const RowControls* controls) {
  RowPass out;
  if (controls != nullptr && controls->penalties != nullptr && controls->penalties->active())
    apply_penalties(row, vocab, *controls->penalties);
  for (size_t v = 0; v < vocab; ++v) row[v] = row[v] / temperature;
  const float max_z = row_max(row, vocab, out.argmax, where);
  double sum_e = 0.0, sum_ed = 0.0;
  for (size_t v = 0; v < vocab; ++v) {
    const float d = row[v] - max_z;
    const float e = std::exp(d);
    scratch[v] = e;
    if (e > 0.0f) {
      sum_e += double(e);
      sum_ed += double(e) * double(d);
    }
  }
  out.entropy = entropy_of(sum_e, sum_ed);
  if (uniform == nullptr) return out;
  // The entropy above is the unfiltered distribution's; the filters only
  // narrow what draw B may pick (docs/model.md §3.7).
  if (controls != nullptr && controls->filters != nullptr && controls->filters->active())
    sum_e = filter_weights(scratch, vocab, *controls->filters);
  out.sample = inverse_cdf(scratch, vocab, *uniform * sum_e);
  return out;
}

}  // namespace dgemma

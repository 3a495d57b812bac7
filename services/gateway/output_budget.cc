#include "services/gateway/output_budget.h"

#include <algorithm>

namespace orca::gateway {

bool OutputBudget::TryCharge(size_t bytes) {
  size_t current = buffered_.load();
  do {
    if (bytes > options_.max_bytes || current > options_.max_bytes - bytes) {
      num_refused_.fetch_add(1);
      return false;
    }
  } while (!buffered_.compare_exchange_weak(current, current + bytes));
  const size_t now = current + bytes;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return true;
}

void OutputBudget::Release(size_t bytes) { buffered_.fetch_sub(bytes); }

size_t OutputBudget::StreamShare() const {
  const int64_t streams = std::max<int64_t>(1, num_streams_.load());
  return std::max<size_t>(1, options_.max_bytes / (2 * static_cast<size_t>(streams)));
}

}  // namespace orca::gateway

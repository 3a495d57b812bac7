#include "core/sched/kv_slot_budget.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/logging.h"

namespace orca::sched {

absl::StatusOr<KvSlotBudget> KvSlotBudget::Create(int64_t n_slots, int32_t kv_block_size) {
  if (n_slots < 1) {
    return absl::InvalidArgumentError(absl::StrCat("n_slots must be >= 1 (got ", n_slots, ")"));
  }
  if (kv_block_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("kv_block_size must be >= 1 (got ", kv_block_size, ")"));
  }
  if (n_slots % kv_block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_slots (", n_slots, ") must be a multiple of kv_block_size (", kv_block_size, ")"));
  }
  return KvSlotBudget(n_slots, kv_block_size);
}

int64_t KvSlotBudget::ReservationFor(int64_t num_tokens) const {
  const int64_t blocks = (num_tokens + kv_block_size_ - 1) / kv_block_size_;
  return blocks * kv_block_size_;
}

bool KvSlotBudget::TryReserve(int64_t slots) {
  if (slots < 0 || !Fits(slots)) return false;
  n_rsrv_ += slots;
  return true;
}

void KvSlotBudget::Release(int64_t slots) {
  ORCA_CHECK(slots >= 0 && slots <= n_rsrv_)
      << "releasing " << slots << " KV slots with only " << n_rsrv_ << " reserved";
  n_rsrv_ -= slots;
}

}  // namespace orca::sched

#pragma once
/// KV slot accounting of the scheduler (paper §4.2: n_slots, n_rsrv and each request's
/// KV reservation; Algorithm 1 is orca_policy.h).

#include <cstdint>

#include "absl/status/statusor.h"

namespace orca::sched {

/// Counts reserved KV slots against the budget `n_slots`. A request reserves its
/// kv_reservation_slots (prompt + max new tokens, rounded up to `kv_block_size`) when
/// admitted and returns them when it finishes in any way, so the engine never has to evict.
/// Invariant: 0 <= n_rsrv <= n_slots.
class KvSlotBudget {
 public:
  /// n_slots >= 1; kv_block_size >= 1 and divides n_slots (the workers' block pool holds
  /// n_slots / kv_block_size blocks). Errors name the offending value.
  static absl::StatusOr<KvSlotBudget> Create(int64_t n_slots, int32_t kv_block_size);

  /// The kv_reservation_slots of a request of `num_tokens` tokens (prompt + max new
  /// tokens): num_tokens rounded up to a block.
  [[nodiscard]] int64_t ReservationFor(int64_t num_tokens) const;
  /// True when `slots` more fit: n_rsrv + slots <= n_slots.
  [[nodiscard]] bool Fits(int64_t slots) const { return slots <= n_slots_ - n_rsrv_; }
  /// Reserves `slots` if they fit; returns false (nothing changes) when they do not.
  [[nodiscard]] bool TryReserve(int64_t slots);
  /// Returns slots reserved earlier. Releasing more than is reserved is a bug (checked).
  void Release(int64_t slots);

  int64_t n_slots() const { return n_slots_; }
  int64_t n_rsrv() const { return n_rsrv_; }
  int64_t num_free() const { return n_slots_ - n_rsrv_; }
  int32_t kv_block_size() const { return kv_block_size_; }

 private:
  KvSlotBudget(int64_t n_slots, int32_t kv_block_size) : n_slots_(n_slots), kv_block_size_(kv_block_size) {}

  int64_t n_slots_;
  int32_t kv_block_size_;
  int64_t n_rsrv_ = 0;
};

}  // namespace orca::sched

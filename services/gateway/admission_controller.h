#pragma once
/// Bounds the generation requests in flight on this gateway
/// (--max-concurrent-requests). Beyond the limit requests get 503 with
/// Retry-After instead of queueing without bound.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

namespace orca::gateway {

class AdmissionController;

/// One admitted request; released when destroyed. Movable.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
  AdmissionTicket& operator=(AdmissionTicket&& other) noexcept;
  AdmissionTicket(const AdmissionTicket&) = delete;
  AdmissionTicket& operator=(const AdmissionTicket&) = delete;
  ~AdmissionTicket() { Release(); }
  void Release();

 private:
  friend class AdmissionController;
  explicit AdmissionTicket(AdmissionController* owner) : owner_(owner) {}
  AdmissionController* owner_ = nullptr;
};

class AdmissionController {
 public:
  /// `max_in_flight` <= 0 means unlimited.
  explicit AdmissionController(int64_t max_in_flight) : max_in_flight_(max_in_flight) {}
  /// A ticket, or nullopt when the limit is reached. Must outlive its tickets.
  std::optional<AdmissionTicket> TryAdmit();
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  int64_t max_in_flight() const { return max_in_flight_; }

 private:
  friend class AdmissionTicket;
  const int64_t max_in_flight_;
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace orca::gateway

#include "services/gateway/admission_controller.h"

namespace orca::gateway {

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    other.owner_ = nullptr;
  }
  return *this;
}

void AdmissionTicket::Release() {
  if (owner_ != nullptr) owner_->in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  owner_ = nullptr;
}

std::optional<AdmissionTicket> AdmissionController::TryAdmit() {
  const int64_t now = in_flight_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (max_in_flight_ > 0 && now > max_in_flight_) {
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    return std::nullopt;
  }
  return AdmissionTicket(this);
}

}  // namespace orca::gateway

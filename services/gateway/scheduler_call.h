#pragma once
/// One streaming Generate call to a scheduler, driven by gRPC's callback API
/// (no thread per call). Responses and the final status are handed to a
/// listener on gRPC's callback threads; Cancel() cancels the call at once
/// (the scheduler treats a cancelled call as a cancelled request and frees its
/// KV slots).
///
/// Backpressure: after each response the listener may pause reading
/// (ReadyForMore false) until its client has taken the output. Unread, the
/// call's HTTP/2 flow-control window fills and the scheduler coalesces the
/// request's tokens into its next message instead of the gateway buffering
/// them. A paused call holds a gRPC hold, so OnDone waits for the resume (or
/// for Cancel(), which lets a paused call finish at once).

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "orca/v1/scheduler.grpc.pb.h"
#include "services/gateway/scheduler_router.h"

namespace orca::gateway {

/// Receives one call's events. OnResponse calls of one call never overlap;
/// OnDone is the last call.
class SchedulerCallListener {
 public:
  virtual ~SchedulerCallListener() = default;
  virtual void OnSchedulerResponse(int choice, const orca::v1::GenerateResponse& response) = 0;
  virtual void OnSchedulerDone(int choice, const grpc::Status& status) = 0;
  /// Asked after each OnSchedulerResponse: true to read the next response now;
  /// false to pause until `resume` is called (once, from any thread, never
  /// inside a lock the listener's other calls take). Default: never pause.
  virtual bool ReadyForMore(int choice, std::function<void()> resume) { return true; }
};

class SchedulerCall : public grpc::ClientReadReactor<orca::v1::GenerateResponse> {
 public:
  /// Starts the call on the leased scheduler. The call keeps itself (and the
  /// listener) alive until OnDone; the returned pointer is for Cancel().
  static std::shared_ptr<SchedulerCall> Start(SchedulerLease lease, orca::v1::GenerateRequest request, int choice,
                                              std::shared_ptr<SchedulerCallListener> listener);

  /// Cancels the call; safe at any time, from any thread, more than once. A
  /// paused call reads no more and finishes.
  void Cancel();
  const std::string& scheduler_address() const { return address_; }

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  SchedulerCall(SchedulerLease lease, orca::v1::GenerateRequest request, int choice,
                std::shared_ptr<SchedulerCallListener> listener);
  /// Ends the pause numbered `pause` (if still current): reads on, drops the hold.
  void Resume(uint64_t pause);

  // The channel pin outlives the context (members end in reverse order), and both go at the
  // end of OnDone, not with this object (which its job may hold much longer): the router waits
  // for the pins before it destroys channels (scheduler_router.cc, ChannelReaper).
  std::shared_ptr<const void> channel_pin_;
  absl::Mutex context_mu_;
  std::unique_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(context_mu_);
  SchedulerLease lease_;
  const std::string address_;
  const orca::v1::GenerateRequest request_;
  orca::v1::GenerateResponse response_;
  const int choice_;
  std::shared_ptr<SchedulerCallListener> listener_;
  std::shared_ptr<SchedulerCall> self_;  // released in OnDone
  uint64_t num_pauses_ = 0;              // reactions only
  /// The current pause's number while reading is paused (and a hold is held), else 0.
  std::atomic<uint64_t> paused_{0};
};

}  // namespace orca::gateway

#pragma once
/// A Gloo rendezvous store backed by the scheduler's key-value RPCs
/// (orca.v1.Scheduler StoreSet/StoreGet), so workers in different pods or
/// hosts meet without a shared filesystem.

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "orca/v1/scheduler.grpc.pb.h"

namespace orca::worker {

class GrpcRendezvousStore final : public gloo::rendezvous::Store {
 public:
  /// `channel` carries the internal credential (services/common/channels.h).
  GrpcRendezvousStore(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout);

  /// Waits end (gloo::IoException) as soon as `cancelled` returns true,
  /// checked at least every 250 ms: the session being formed is over. Set it
  /// before each rendezvous, from the thread that runs it.
  void SetCancelled(std::function<bool()> cancelled) { cancelled_ = std::move(cancelled); }

  // gloo::rendezvous::Store (throws gloo::IoException on failure, as Gloo expects).
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  bool Fetch(const std::string& key, std::chrono::milliseconds wait, std::vector<char>* out);

  std::unique_ptr<v1::Scheduler::Stub> stub_;
  void ThrowIfCancelled(const std::string& key) const;

  std::chrono::milliseconds timeout_;
  std::function<bool()> cancelled_;
};

}  // namespace orca::worker

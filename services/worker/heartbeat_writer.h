#pragma once
/// The server side of orca.v1.Worker/Heartbeats: the stage's liveness and
/// progress, pushed by the node's heartbeat thread every interval, whatever
/// the stage is computing. Only the latest heartbeat waits behind a write in
/// flight (a slow reader gets fresh news, not a backlog).

#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/time/time.h"
#include "orca/v1/worker.grpc.pb.h"
#include "services/common/server_stream_writer.h"

namespace orca::worker {

/// Receives heartbeats. Must not block.
class HeartbeatSink {
 public:
  virtual ~HeartbeatSink() = default;
  virtual void Push(v1::Heartbeat heartbeat) = 0;
};

/// Where a Heartbeats call subscribes (the WorkerNode; a fake in tests).
class HeartbeatSource {
 public:
  virtual ~HeartbeatSource() = default;
  /// Sends `sink` a heartbeat now and then every `interval` until unsubscribed.
  virtual void SubscribeHeartbeats(std::shared_ptr<HeartbeatSink> sink, absl::Duration interval) = 0;
  virtual void UnsubscribeHeartbeats(const HeartbeatSink* sink) = 0;
};

class HeartbeatWriter final : public services::ServerStreamWriter<v1::Heartbeat>, public HeartbeatSink {
 public:
  /// Starts one Heartbeats call (interval clamped to [10 ms, 5 s]; 0 = 500 ms);
  /// the returned reactor owns itself until OnDone.
  static grpc::ServerWriteReactor<v1::Heartbeat>* Start(HeartbeatSource* source, const v1::HeartbeatRequest& request);

  void Push(v1::Heartbeat heartbeat) override { Write(std::move(heartbeat)); }

 private:
  explicit HeartbeatWriter(HeartbeatSource* source) : ServerStreamWriter(Options{.max_queued = 1}), source_(source) {}
  void OnFinished() override { source_->UnsubscribeHeartbeats(this); }

  HeartbeatSource* const source_;
};

}  // namespace orca::worker

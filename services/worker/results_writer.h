#pragma once
/// The server side of orca.v1.Worker/Results: streams the last stage's
/// iteration results to the engine master, one write at a time, in order.

#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/status/status.h"
#include "orca/v1/worker.grpc.pb.h"
#include "services/common/server_stream_writer.h"

namespace orca::worker {

/// Receives the last stage's results (the Results stream). Must not block.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void Push(v1::IterationResult result) = 0;
};

/// Where a Results call subscribes (the WorkerNode; a fake in tests).
class ResultSource {
 public:
  virtual ~ResultSource() = default;
  /// Subscribes `sink` to `session`'s results, replacing an earlier subscriber.
  virtual absl::Status SubscribeResults(uint64_t session, std::shared_ptr<ResultSink> sink) = 0;
  /// Drops `sink` if it is still the subscriber.
  virtual void Unsubscribe(const ResultSink* sink) = 0;
};

/// One Results call: the results pushed by the source, in order, one write
/// at a time (services/common/server_stream_writer.h keeps gRPC's rules).
class ResultsWriter final : public services::ServerStreamWriter<v1::IterationResult>, public ResultSink {
 public:
  /// Starts one Results call; the returned reactor owns itself until OnDone.
  static grpc::ServerWriteReactor<v1::IterationResult>* Start(ResultSource* source, uint64_t session);

  void Push(v1::IterationResult result) override { Write(std::move(result)); }

 private:
  explicit ResultsWriter(ResultSource* source) : source_(source) {}
  void OnFinished() override { source_->Unsubscribe(this); }

  ResultSource* const source_;
};

}  // namespace orca::worker

#pragma once
/// orca.v1.Worker over gRPC's callback API: Control (upstream pushes
/// iterations), Results (the engine master reads the last stage's samples),
/// Heartbeats, GetInfo. Handlers hand everything to the node and return.
///
/// Every RPC requires the internal credential: a Control message alone can
/// start a new session, which drops every request in flight, so a caller
/// without the token ends UNAUTHENTICATED before the node sees anything.

#include "orca/v1/worker.grpc.pb.h"
#include "services/common/internal_auth.h"
#include "services/worker/worker_backend.h"

namespace orca::worker {

class WorkerService final : public v1::Worker::CallbackService {
 public:
  /// `node` must outlive the service. Calls without `auth`'s token are refused
  /// (InternalAuth::Insecure() lets every caller in).
  WorkerService(WorkerBackend* node, services::InternalAuth auth) : node_(node), auth_(std::move(auth)) {}

  grpc::ServerReadReactor<v1::ControlMessage>* Control(grpc::CallbackServerContext* context,
                                                       v1::ControlSummary* summary) override;
  grpc::ServerWriteReactor<v1::IterationResult>* Results(grpc::CallbackServerContext* context,
                                                         const v1::ResultsRequest* request) override;
  grpc::ServerWriteReactor<v1::Heartbeat>* Heartbeats(grpc::CallbackServerContext* context,
                                                      const v1::HeartbeatRequest* request) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context, const v1::WorkerInfoRequest* request,
                                    v1::WorkerInfo* response) override;

 private:
  WorkerBackend* node_;
  const services::InternalAuth auth_;
};

}  // namespace orca::worker

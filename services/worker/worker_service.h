#pragma once
/// orca.v1.Worker over gRPC's callback API: Control (upstream pushes
/// iterations), Results (the engine master reads the last stage's samples),
/// GetInfo. Handlers hand everything to the WorkerNode and return.

#include "orca/v1/worker.grpc.pb.h"
#include "services/worker/worker_node.h"

namespace orca::worker {

class WorkerService final : public v1::Worker::CallbackService {
 public:
  explicit WorkerService(WorkerNode* node) : node_(node) {}

  grpc::ServerReadReactor<v1::ControlMessage>* Control(grpc::CallbackServerContext* context,
                                                       v1::ControlSummary* summary) override;
  grpc::ServerWriteReactor<v1::IterationResult>* Results(grpc::CallbackServerContext* context,
                                                         const v1::ResultsRequest* request) override;
  grpc::ServerWriteReactor<v1::Heartbeat>* Heartbeats(grpc::CallbackServerContext* context,
                                                      const v1::HeartbeatRequest* request) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context, const v1::WorkerInfoRequest* request,
                                    v1::WorkerInfo* response) override;

 private:
  WorkerNode* node_;
};

}  // namespace orca::worker

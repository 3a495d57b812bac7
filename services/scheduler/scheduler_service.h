#pragma once
/// orca.v1.Scheduler over gRPC's callback API: handlers translate between
/// the wire and the SchedulerLoop and return at once (they never block a
/// gRPC thread); streams are fed from the loop thread.

#include <memory>

#include "orca/v1/scheduler.grpc.pb.h"
#include "services/common/api_keys.h"
#include "services/scheduler/rendezvous_store.h"
#include "services/scheduler/scheduler_loop.h"

namespace orca::scheduler {

class SchedulerService final : public v1::Scheduler::CallbackService {
 public:
  /// `loop` must outlive the service. With `keys` enabled every call must
  /// carry "authorization: Bearer <key>" (the gateways' and workers'
  /// --scheduler-api-key); others fail UNAUTHENTICATED.
  explicit SchedulerService(SchedulerLoop* loop, services::ApiKeys keys = {}) : loop_(loop), keys_(std::move(keys)) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* context,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* context, const v1::CancelRequest* request,
                                   v1::CancelResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context, const v1::StatsRequest* request,
                                     v1::SchedulerStats* response) override;
  grpc::ServerUnaryReactor* StoreSet(grpc::CallbackServerContext* context, const v1::StoreSetRequest* request,
                                     v1::StoreSetResponse* response) override;
  grpc::ServerUnaryReactor* StoreGet(grpc::CallbackServerContext* context, const v1::StoreGetRequest* request,
                                     v1::StoreGetResponse* response) override;

  RendezvousStore& store() { return store_; }

 private:
  SchedulerLoop* loop_;
  const services::ApiKeys keys_;
  RendezvousStore store_;
};

/// Converts a wire request into the scheduler's record. InvalidArgument names the field.
absl::StatusOr<sched::RequestSpec> SpecFromProto(const v1::GenerateRequest& request, absl::Time grpc_deadline);

}  // namespace orca::scheduler

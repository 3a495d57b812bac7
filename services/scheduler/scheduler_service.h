#pragma once
/// orca.v1.Scheduler over gRPC's callback API: handlers translate between
/// the wire and the SchedulerLoop and return at once (they never block a
/// gRPC thread); streams are fed from the loop thread.

#include <memory>

#include "orca/v1/scheduler.grpc.pb.h"
#include "services/common/internal_auth.h"
#include "services/scheduler/constraint_compiler.h"
#include "services/scheduler/rendezvous_store.h"
#include "services/scheduler/scheduler_loop.h"

namespace orca::scheduler {

class SchedulerService final : public v1::Scheduler::CallbackService {
 public:
  /// `loop` must outlive the service. Every call must carry `auth`'s internal
  /// token (the gateways and workers send it); others end UNAUTHENTICATED
  /// before anything is done. InternalAuth::Insecure() lets every caller in.
  SchedulerService(SchedulerLoop* loop, services::InternalAuth auth) : loop_(loop), auth_(std::move(auth)) {}

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
  const services::InternalAuth auth_;
  RendezvousStore store_;
  // Generate re-validates every request (SpecFromProto) and compiles its structured-output
  // constraint here before submitting it to the loop.
  const std::unique_ptr<ConstraintCompiler> constraints_ = NewConstraintCompiler();

  static std::unique_ptr<ConstraintCompiler> NewConstraintCompiler();
};

/// What the scheduler knows of the model to re-validate requests against.
struct ModelLimits {
  int32_t vocab_size = 0;  ///< 0 = unknown: token ids are checked for sign only
};

/// Converts a wire request into the scheduler's record, re-validating all of it:
/// whoever reached the port may have sent it, not only a gateway. Token ids (prompt,
/// stop_token_ids, logit_bias keys, the constraint's end ids) against the vocabulary
/// when known; max/min_new_tokens, sampling, stop ids, priority and the constraint's
/// own limits against core/common/sampling_limits.h, in its words. InvalidArgument
/// names the field. The constraint is compiled afterwards (ConstraintCompiler); the
/// prompt and max_new_tokens against the context and the KV budget when the request is
/// submitted (sched::Scheduler::Submit), still before it is admitted.
absl::StatusOr<sched::RequestSpec> SpecFromProto(const v1::GenerateRequest& request, absl::Time grpc_deadline,
                                                 const ModelLimits& model = {});

}  // namespace orca::scheduler

#include "services/gateway/scheduler_call.h"

namespace orca::gateway {

SchedulerCall::SchedulerCall(SchedulerLease lease, orca::v1::GenerateRequest request, int choice,
                             std::shared_ptr<SchedulerCallListener> listener)
    : lease_(std::move(lease)),
      address_(lease_.address()),
      request_(std::move(request)),
      choice_(choice),
      listener_(std::move(listener)) {}

std::shared_ptr<SchedulerCall> SchedulerCall::Start(SchedulerLease lease, orca::v1::GenerateRequest request, int choice,
                                                    std::shared_ptr<SchedulerCallListener> listener) {
  std::shared_ptr<SchedulerCall> call(
      new SchedulerCall(std::move(lease), std::move(request), choice, std::move(listener)));
  call->self_ = call;
  // Fail fast when the scheduler is unreachable instead of queueing on the channel.
  call->context_.set_wait_for_ready(false);
  call->lease_.Authorize(&call->context_);
  call->lease_.stub()->async()->Generate(&call->context_, &call->request_, call.get());
  call->StartRead(&call->response_);
  call->StartCall();
  return call;
}

void SchedulerCall::OnReadDone(bool ok) {
  if (!ok) return;  // end of stream or failure: OnDone follows
  listener_->OnSchedulerResponse(choice_, response_);
  response_.Clear();
  StartRead(&response_);
}

void SchedulerCall::OnDone(const grpc::Status& status) {
  lease_.Release(/*unavailable=*/status.error_code() == grpc::StatusCode::UNAVAILABLE);
  std::shared_ptr<SchedulerCallListener> listener = std::move(listener_);
  listener->OnSchedulerDone(choice_, status);
  // May destroy this object; nothing touches members afterwards.
  std::shared_ptr<SchedulerCall> self = std::move(self_);
}

}  // namespace orca::gateway

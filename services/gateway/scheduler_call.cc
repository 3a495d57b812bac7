#include "services/gateway/scheduler_call.h"

namespace orca::gateway {

SchedulerCall::SchedulerCall(SchedulerLease lease, orca::v1::GenerateRequest request, int choice,
                             std::shared_ptr<SchedulerCallListener> listener)
    : channel_pin_(lease.Pin()),
      context_(std::make_unique<grpc::ClientContext>()),
      lease_(std::move(lease)),
      address_(lease_.address()),
      request_(std::move(request)),
      choice_(choice),
      listener_(std::move(listener)) {}

std::shared_ptr<SchedulerCall> SchedulerCall::Start(SchedulerLease lease, orca::v1::GenerateRequest request, int choice,
                                                    std::shared_ptr<SchedulerCallListener> listener) {
  std::shared_ptr<SchedulerCall> call(
      new SchedulerCall(std::move(lease), std::move(request), choice, std::move(listener)));
  call->self_ = call;
  grpc::ClientContext* context;
  {
    absl::MutexLock lock(&call->context_mu_);
    context = call->context_.get();
  }
  // Fail fast when the scheduler is unreachable instead of queueing on the channel.
  context->set_wait_for_ready(false);
  call->lease_.Authorize(context);
  call->lease_.stub()->async()->Generate(context, &call->request_, call.get());
  call->StartRead(&call->response_);
  call->StartCall();  // the context is OnDone's from here on
  return call;
}

void SchedulerCall::Cancel() {
  {
    absl::MutexLock lock(&context_mu_);
    if (context_) context_->TryCancel();
  }
  // A paused call has no read outstanding: dropping its hold lets it finish
  // (RemoveHold outside a reaction schedules OnDone; it never runs it here).
  if (paused_.exchange(0) != 0) RemoveHold();
}

void SchedulerCall::OnReadDone(bool ok) {
  if (!ok) return;  // end of stream or failure: OnDone follows
  listener_->OnSchedulerResponse(choice_, response_);
  response_.Clear();
  // The hold keeps OnDone away while no read is outstanding; it is taken
  // before the listener may resume from another thread.
  const uint64_t pause = ++num_pauses_;
  AddHold();
  paused_.store(pause);
  std::weak_ptr<SchedulerCall> weak = self_;
  if (listener_->ReadyForMore(choice_, [weak, pause] {
        if (std::shared_ptr<SchedulerCall> call = weak.lock()) call->Resume(pause);
      })) {
    Resume(pause);
  }
}

void SchedulerCall::Resume(uint64_t pause) {
  uint64_t expected = pause;
  if (!paused_.compare_exchange_strong(expected, 0)) return;  // resumed already, or cancelled
  StartRead(&response_);
  RemoveHold();
}

void SchedulerCall::OnDone(const grpc::Status& status) {
  lease_.Release(/*unavailable=*/status.error_code() == grpc::StatusCode::UNAVAILABLE);
  std::shared_ptr<SchedulerCallListener> listener = std::move(listener_);
  listener->OnSchedulerDone(choice_, status);
  // gRPC is done with the context: end it, then unpin the channel (in that order; see the header).
  std::unique_ptr<grpc::ClientContext> context;
  {
    absl::MutexLock lock(&context_mu_);
    context = std::move(context_);
  }
  context.reset();
  std::shared_ptr<const void> pin = std::move(channel_pin_);
  pin.reset();
  // May destroy this object; nothing touches members afterwards.
  std::shared_ptr<SchedulerCall> self = std::move(self_);
}

}  // namespace orca::gateway

#include "services/worker/worker_service.h"

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/common/logging.h"
#include "services/common/grpc_status.h"

namespace orca::worker {
namespace {

// Reads control messages in order and hands each to the node at once.
class ControlReader final : public grpc::ServerReadReactor<v1::ControlMessage> {
 public:
  ControlReader(WorkerNode* node, v1::ControlSummary* summary) : node_(node), summary_(summary) { StartRead(&msg_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      summary_->set_iterations(count_);
      Finish(grpc::Status::OK);
      return;
    }
    ++count_;
    node_->OnControl(std::move(msg_));
    msg_.Clear();
    StartRead(&msg_);
  }
  void OnDone() override { delete this; }

 private:
  WorkerNode* node_;
  v1::ControlSummary* summary_;
  v1::ControlMessage msg_;
  uint64_t count_ = 0;
};

// Streams results to the engine master, one write at a time, in order.
class ResultsWriter final : public grpc::ServerWriteReactor<v1::IterationResult>,
                            public ResultSink,
                            public std::enable_shared_from_this<ResultsWriter> {
 public:
  explicit ResultsWriter(WorkerNode* node) : node_(node) {}

  void Begin(std::shared_ptr<ResultsWriter> self, uint64_t session) {
    self_ = std::move(self);
    absl::Status s = node_->SubscribeResults(session, self_);
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      Finish(services::ToGrpcStatus(s));
    }
  }
  void Push(v1::IterationResult result) override {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    pending_.push_back(std::move(result));
    MaybeWrite();
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "results stream broken"));
      return;
    }
    MaybeWrite();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    if (!finished_) {
      finished_ = true;
      Finish(grpc::Status::CANCELLED);
    }
  }
  void OnDone() override {
    node_->Unsubscribe(this);
    std::shared_ptr<ResultsWriter> keep;
    absl::MutexLock lock(&mu_);
    finished_ = true;
    keep = std::move(self_);
  }

 private:
  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || pending_.empty() || finished_) return;
    current_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    StartWrite(&current_);
  }

  WorkerNode* node_;
  absl::Mutex mu_;
  // Set in Begin before any callback can run; moved out (under mu_) in OnDone.
  std::shared_ptr<ResultsWriter> self_;
  std::deque<v1::IterationResult> pending_ ABSL_GUARDED_BY(mu_);
  v1::IterationResult current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerReadReactor<v1::ControlMessage>* WorkerService::Control(grpc::CallbackServerContext*,
                                                                    v1::ControlSummary* summary) {
  return new ControlReader(node_, summary);
}

grpc::ServerWriteReactor<v1::IterationResult>* WorkerService::Results(grpc::CallbackServerContext*,
                                                                      const v1::ResultsRequest* request) {
  auto writer = std::make_shared<ResultsWriter>(node_);
  writer->Begin(writer, request->session_id());
  return writer.get();
}

grpc::ServerUnaryReactor* WorkerService::GetInfo(grpc::CallbackServerContext* context, const v1::WorkerInfoRequest*,
                                                 v1::WorkerInfo* response) {
  *response = node_->Info();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace orca::worker

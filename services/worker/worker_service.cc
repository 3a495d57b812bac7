#include "services/worker/worker_service.h"

#include "core/common/logging.h"
#include "services/worker/results_writer.h"

namespace orca::worker {
namespace {

// Reads control messages in order and hands each to the node at once.
class ControlReader final : public grpc::ServerReadReactor<v1::ControlMessage> {
 public:
  // Built on the handler's thread, its reactions run on gRPC's: the hand-off is stated to
  // ThreadSanitizer (server_stream_writer.h).
  ControlReader(WorkerBackend* node, v1::ControlSummary* summary) : node_(node), summary_(summary) {
    ORCA_GRPC_HANDS_OFF(this);
    StartRead(&msg_);
  }

  void OnReadDone(bool ok) override {
    ORCA_GRPC_REACTS(this);
    if (!ok) {
      summary_->set_iterations(count_);
      ORCA_GRPC_HANDS_OFF(this);
      Finish(grpc::Status::OK);
      return;
    }
    ++count_;
    node_->OnControl(std::move(msg_));
    msg_.Clear();
    ORCA_GRPC_HANDS_OFF(this);
    StartRead(&msg_);
  }
  void OnDone() override {
    ORCA_GRPC_REACTS(this);
    delete this;
  }

 private:
  WorkerBackend* node_;
  v1::ControlSummary* summary_;
  v1::ControlMessage msg_;
  uint64_t count_ = 0;
};

}  // namespace

// Every handler checks the caller's credential first: a refused call never reaches the node.
grpc::ServerReadReactor<v1::ControlMessage>* WorkerService::Control(grpc::CallbackServerContext* context,
                                                                    v1::ControlSummary* summary) {
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok()) return services::RefuseRead<v1::ControlMessage>(auth);
  return new ControlReader(node_, summary);
}

grpc::ServerWriteReactor<v1::IterationResult>* WorkerService::Results(grpc::CallbackServerContext* context,
                                                                      const v1::ResultsRequest* request) {
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok())
    return services::RefuseWrite<v1::IterationResult>(auth);
  return ResultsWriter::Start(node_, request->session_id());
}

grpc::ServerWriteReactor<v1::Heartbeat>* WorkerService::Heartbeats(grpc::CallbackServerContext* context,
                                                                   const v1::HeartbeatRequest* request) {
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok()) return services::RefuseWrite<v1::Heartbeat>(auth);
  return HeartbeatWriter::Start(node_, *request);
}

grpc::ServerUnaryReactor* WorkerService::GetInfo(grpc::CallbackServerContext* context, const v1::WorkerInfoRequest*,
                                                 v1::WorkerInfo* response) {
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok()) return services::RefuseUnary(context, auth);
  *response = node_->Info();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace orca::worker

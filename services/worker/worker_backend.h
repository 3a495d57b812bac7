#pragma once
/// What orca.v1.Worker's service drives: the WorkerNode of a pipeline stage,
/// or a fake in tests of the service itself (e.g. its authentication).

#include "orca/v1/worker.grpc.pb.h"
#include "services/worker/heartbeat_writer.h"
#include "services/worker/results_writer.h"

namespace orca::worker {

class WorkerBackend : public ResultSource, public HeartbeatSource {
 public:
  /// A control message from upstream, in order. Must not block.
  virtual void OnControl(v1::ControlMessage msg) = 0;
  /// The stage's facts (GetInfo).
  virtual v1::WorkerInfo Info() const = 0;
};

}  // namespace orca::worker

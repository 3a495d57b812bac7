#include "services/worker/heartbeat_writer.h"

#include <algorithm>

namespace orca::worker {

grpc::ServerWriteReactor<v1::Heartbeat>* HeartbeatWriter::Start(HeartbeatSource* source,
                                                                const v1::HeartbeatRequest& request) {
  const int64_t millis =
      request.interval_millis() == 0 ? 500 : std::clamp<int64_t>(request.interval_millis(), 10, 5000);
  std::shared_ptr<HeartbeatWriter> writer(new HeartbeatWriter(source));
  writer->Begin();
  source->SubscribeHeartbeats(writer, absl::Milliseconds(millis));
  return writer.get();
}

}  // namespace orca::worker

#include "services/worker/results_writer.h"

#include "services/common/grpc_status.h"

namespace orca::worker {

grpc::ServerWriteReactor<v1::IterationResult>* ResultsWriter::Start(ResultSource* source, uint64_t session) {
  std::shared_ptr<ResultsWriter> writer(new ResultsWriter(source));
  writer->Begin();
  if (absl::Status s = source->SubscribeResults(session, writer); !s.ok()) writer->Close(services::ToGrpcStatus(s));
  return writer.get();
}

}  // namespace orca::worker

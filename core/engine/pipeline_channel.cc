#include "core/engine/pipeline_channel.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/engine/gloo_communicator.h"

namespace orca::engine {
namespace {

// Sent before every iteration's activations: whether the sending stage
// succeeded, how many floats follow, and why it failed otherwise.
struct FrameHeader {
  int64_t status = 0;  // 0 = ok
  int64_t count = 0;
  char error[240] = {};
};
static_assert(sizeof(FrameHeader) == 256);

using Clock = std::chrono::steady_clock;
int64_t Micros(Clock::duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }

// A device link that failed or hung shows in the step's status (the last stage's wait for
// its logits, a later NCCL call); validation errors have other codes.
bool IsLinkFailure(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsAborted(s);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PipelineChannel>> PipelineChannel::Create(const Options& o) {
  if (o.engine == nullptr) return absl::InvalidArgumentError("a pipeline channel needs the stage's engine");
  if (o.num_stages < 2 || o.stage < 0 || o.stage >= o.num_stages)
    return absl::InvalidArgumentError(absl::StrCat("stage ", o.stage, " of ", o.num_stages, " has no pipeline peers"));
  std::unique_ptr<PipelineChannel> c(new PipelineChannel());
  c->stage_ = o.stage;
  c->engine_ = o.engine;
  c->device_ = o.engine->CanLinkDevices();
  GlooCommunicator::Options go;
  go.store = o.store;
  go.prefix = o.prefix;
  go.rank = o.stage;
  go.size = o.num_stages;
  go.hostname = o.hostname;
  go.port = o.port;
  go.timeout = o.timeout;
  go.op_timeout = o.op_timeout;
  ORCA_ASSIGN_OR_RETURN(c->host_, GlooCommunicator::Create(go));
  if (c->device_) {
    Engine::PipelineLinkOptions lo;
    lo.store = o.store;
    lo.prefix = absl::StrCat(o.prefix, "/nccl");
    lo.timeout = o.timeout;
    lo.op_timeout = o.op_timeout;
    ORCA_RETURN_IF_ERROR(o.engine->ConnectPipeline(lo));
  }
  return c;
}

PipelineChannel::~PipelineChannel() {
  if (device_) engine_->DisconnectPipeline();
}

void PipelineChannel::Abort() {
  if (host_ != nullptr) host_->Abort();
  if (device_) engine_->AbortPipeline();
}

absl::Status PipelineChannel::ReceiveFrame(int64_t count, absl::Status* upstream) {
  *upstream = absl::OkStatus();
  FrameHeader h;
  ORCA_RETURN_IF_ERROR(host_->Recv(stage_ - 1, &h, sizeof(h)));
  if (h.status != 0) {
    h.error[sizeof(h.error) - 1] = 0;
    *upstream = absl::AbortedError(h.error);
    return absl::OkStatus();
  }
  if (h.count != count)
    return absl::DataLossError(absl::StrCat("stage ", stage_ - 1, " sent ", h.count, " values, expected ", count));
  if (device_) return absl::OkStatus();  // on the links; Step receives them on the device
  hidden_in_.resize(static_cast<size_t>(count));
  return host_->Recv(stage_ - 1, hidden_in_.data(), sizeof(float) * count);
}

absl::Status PipelineChannel::SendFrame(const absl::Status& computed, int64_t count, const StepOutput& output) {
  FrameHeader h;
  h.status = computed.ok() ? 0 : 1;
  h.count = computed.ok() ? count : 0;
  if (!computed.ok()) std::strncpy(h.error, std::string(computed.message()).c_str(), sizeof(h.error) - 1);
  if (computed.ok() && !device_ && static_cast<int64_t>(output.hidden.size()) != count)
    return absl::InternalError(
        absl::StrCat("stage ", stage_, " has ", output.hidden.size(), " activation values to send, expected ", count));
  ORCA_RETURN_IF_ERROR(host_->Send(stage_ + 1, &h, sizeof(h)));
  if (!computed.ok() || device_) return absl::OkStatus();
  return host_->Send(stage_ + 1, output.hidden.data(), sizeof(float) * count);
}

StageIteration RunStageIteration(Engine& engine, PipelineChannel* channel, const StepInput& in, StepOutput* out,
                                 const StageHooks& hooks) {
  StageIteration r;
  const bool first = channel == nullptr || engine.partition().has_embedding;
  const bool last = channel == nullptr || engine.is_last_stage();
  int64_t tokens = 0;
  for (const StepSequence& s : in.seqs) tokens += static_cast<int64_t>(s.token_ids.size());
  const int64_t count = tokens * engine.config().hidden_size;
  absl::Status upstream = absl::OkStatus();
  if (!first) {
    const auto t0 = Clock::now();
    if (hooks.waiting) hooks.waiting();
    r.data_plane = channel->ReceiveFrame(count, &upstream);
    if (hooks.received) hooks.received();
    r.comm_micros += Micros(Clock::now() - t0);
    if (!r.data_plane.ok()) {
      r.status = r.data_plane;
      return r;
    }
  }
  r.status = upstream;
  const auto c0 = Clock::now();
  if (r.status.ok()) {
    r.status = engine.Step(in, first ? nullptr : channel->hidden_in(), out);
    if (!r.status.ok() && channel != nullptr && channel->device_activations() && IsLinkFailure(r.status)) {
      r.data_plane = r.status;
      // One shard noticed (the last stage's rank 0 waits for its logits); the others' streams may
      // still wait on their links, and with them the tensor-parallel collectives: abort them all.
      engine.AbortPipeline();
    }
  } else {
    out->Clear();
    for (uint64_t id : in.released_ids) engine.Release(id);
  }
  r.compute_micros = Micros(Clock::now() - c0) - out->timings.comm_micros;
  r.comm_micros += out->timings.comm_micros;
  if (hooks.computed) hooks.computed();
  if (!last && r.data_plane.ok()) {
    const auto t0 = Clock::now();
    r.data_plane = channel->SendFrame(r.status, count, *out);
    r.comm_micros += Micros(Clock::now() - t0);
    if (!r.data_plane.ok()) r.status = r.data_plane;
  }
  return r;
}

}  // namespace orca::engine

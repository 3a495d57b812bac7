#pragma once
/// The data plane between adjacent pipeline stages for one session of the engine master
/// (paper §4.1). Every iteration stage s sends stage s + 1 one frame: a header — did stage s
/// compute the iteration, how many activation values follow, and why not otherwise — then,
/// when it did, the activations [ΣL, H]. Control messages never travel here.
///
/// Two ways for the activations, chosen at Create:
///  - host: the header and the activations over one Gloo group of the stages (rank = stage),
///    from and into host buffers (StepOutput::hidden, hidden_in()). The CPU engine's path.
///  - device: the header over that Gloo group, the activations device to device over the
///    engine's NCCL links (Engine::ConnectPipeline: shard r of each stage to shard r of the
///    next), queued on each shard's stream by Engine::Step. The header is sent as soon as the
///    stage's iteration is queued, so no stage's host waits for its GPU and no GPU waits for
///    its host between stages; the receiving stage queues its NCCL receive behind it.
/// Both sides of a link must agree on the way (every stage of a session runs the same build
/// and device).
///
/// Per iteration, on each stage: ReceiveFrame (stages > 0), Engine::Step with hidden_in(),
/// SendFrame (stages < last) — in that order, including iterations that failed: a frame is
/// sent for every iteration so that the next stage learns of the failure. RunStageIteration
/// below is that sequence (the worker's, and the tests').
///
/// Thread-compatible (the stage's compute thread), except Abort().

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"

namespace gloo::rendezvous {
class Store;
}

namespace orca::engine {

class GlooCommunicator;

class PipelineChannel {
 public:
  struct Options {
    gloo::rendezvous::Store* store = nullptr;  ///< rendezvous of the stages (must outlive Create)
    std::string prefix;                        ///< unique per session
    int32_t stage = 0;
    int32_t num_stages = 2;
    std::string hostname = "127.0.0.1";  ///< this stage's Gloo address
    int32_t port = 0;                    ///< Gloo listening port (0 = ephemeral)
    std::chrono::milliseconds timeout{60000};      ///< forming the channel
    std::chrono::milliseconds op_timeout{300000};  ///< per operation: a backstop (see Abort)
    /// The stage's engine. When it CanLinkDevices(), the activations go device to device and
    /// its links are formed here (and dropped with the channel); otherwise through the host.
    Engine* engine = nullptr;
  };

  /// Forms the Gloo group and, for device activations, the engine's links; blocks until every
  /// stage has joined. DeadlineExceeded / Unavailable / Aborted from the groups.
  static absl::StatusOr<std::unique_ptr<PipelineChannel>> Create(const Options& options);
  ~PipelineChannel();
  PipelineChannel(const PipelineChannel&) = delete;
  PipelineChannel& operator=(const PipelineChannel&) = delete;

  /// Activations go device to device (NCCL) rather than through host buffers (Gloo).
  bool device_activations() const { return device_; }

  /// Receives the previous stage's frame of an iteration with `count` activation values. The
  /// returned status is the data plane's (a peer gone, a size mismatch: DataLoss); a failure
  /// of the previous stage's own iteration comes back in `*upstream` (Aborted with its
  /// message), and then no activations follow. Host activations land in hidden_in(); device
  /// ones are taken off the links by the engine's Step.
  absl::Status ReceiveFrame(int64_t count, absl::Status* upstream);
  /// The host activations of the last frame received, or nullptr (device activations).
  const float* hidden_in() const { return device_ ? nullptr : hidden_in_.data(); }

  /// Sends this stage's frame: `computed` is the iteration's status; when OK, `count`
  /// activation values follow — from `output.hidden` on the host path, already queued on the
  /// links by Step on the device path.
  absl::Status SendFrame(const absl::Status& computed, int64_t count, const StepOutput& output);

  /// Abandons the session's data plane: a wait on a peer returns (Aborted) and every later
  /// operation fails. Any thread.
  void Abort();

 private:
  PipelineChannel() = default;

  int32_t stage_ = 0;
  bool device_ = false;
  Engine* engine_ = nullptr;
  std::unique_ptr<GlooCommunicator> host_;
  std::vector<float> hidden_in_;
};

/// What one stage's iteration came to (RunStageIteration).
struct StageIteration {
  /// The channel's own failure (a peer gone or hung, a malformed frame, a failed device link):
  /// the session's data plane is down. OK otherwise.
  absl::Status data_plane;
  /// The iteration's outcome: the previous stage's failure, this stage's, or data_plane.
  absl::Status status;
  /// Host time of this stage's step, without its communication. With stream-ordered device
  /// work (GPU shards over NCCL) it is the time to queue the iteration, except on the last
  /// stage, which waits for its logits.
  int64_t compute_micros = 0;
  int64_t comm_micros = 0;  ///< frames, and the step's collectives and links (host time, likewise)
};

/// Observers of RunStageIteration's progress (each may be empty).
struct StageHooks {
  std::function<void()> waiting;   ///< before waiting for the previous stage's frame
  std::function<void()> received;  ///< after that wait, whatever came of it
  std::function<void()> computed;  ///< after this stage's step, before its frame goes on
};

/// One iteration of one stage as the pipeline runs it: the previous stage's frame (stages > 0),
/// then Engine::Step on it — or, when the previous stage failed, only the iteration's releases
/// — then this stage's frame to the next one (stages < last). `channel` is nullptr for a
/// single-stage engine. The last stage's samples are in `*out`.
StageIteration RunStageIteration(Engine& engine, PipelineChannel* channel, const StepInput& in, StepOutput* out,
                                 const StageHooks& hooks = {});

}  // namespace orca::engine

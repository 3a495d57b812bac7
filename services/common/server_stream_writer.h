#pragma once
/// The write side of a server-streaming gRPC call (callback API), written once
/// for every streaming reactor in Orca.
///
/// The rules of grpc::ServerWriteReactor, which every server reactor here must
/// keep (breaking one aborts the process inside gRPC; a second Finish is
/// `callback_common.h: assertion failed: call_ == nullptr`, issue 11):
///
///   1. One write in flight: StartWrite again only after OnWriteDone (and,
///      here, after the previous StartWrite has returned: see Pump).
///   2. Finish exactly once, and not while a write is in flight. OnCancel and a
///      failed write (OnWriteDone(false)) both arrive when a client goes away,
///      in either order: the first asks for the end, whoever runs when no
///      write is in flight performs it, nobody performs it twice.
///   3. Nothing after Finish: no StartWrite, no second Finish.
///   4. Every call is finished, even a cancelled one (OnCancel alone does not
///      end it).
///   5. Nothing touches the reactor after OnDone: producers hold a shared_ptr
///      to the writer (which owns itself from Begin() until OnDone), never a
///      raw pointer, and their calls after OnDone are dropped.
///   6. StartWrite/Finish are called outside the writer's lock: gRPC may run a
///      reaction inline, and a reaction takes the lock.
///
/// States:
///
///   OPEN ──Close(status)──▶ CLOSING (queued messages still go out) ──queue empty──▶ FINISHED ──OnDone──▶ DONE
///    │  ──CloseNow / OnCancel / write failed (queue dropped) ─────────────────────────▲
///    (any of them waits for the write in flight, if one is, before Finish)
///
/// Subclasses add the producer side (e.g. the worker's ResultSink) and may
/// override OnCancelled()/OnFinished(). The other reactors were audited
/// against the same rules: the scheduler's GenerateStream
/// (services/scheduler/scheduler_service.cc) and the gateway's Generate
/// reactor (services/gateway/grpc_generation_service.cc) keep their own
/// queues (token coalescing, pipeline events) and follow rules 1-6; the
/// unary and read reactors finish once on their single completion path.

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

// gRPC runs a reaction after the call that caused it (StartWrite -> OnWriteDone, the
// handler's return -> OnCancel/OnDone), but orders the two through atomics inside
// Debian's uninstrumented libgrpc. Under ThreadSanitizer (scripts/tsan.sh) these say so,
// or the writer's own construction would be reported as racing its first reaction.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#include <sanitizer/tsan_interface.h>
#define ORCA_GRPC_HANDS_OFF(object) __tsan_release(object)
#define ORCA_GRPC_REACTS(object) __tsan_acquire(object)
#endif
#endif
#ifndef ORCA_GRPC_HANDS_OFF
#define ORCA_GRPC_HANDS_OFF(object) ((void)(object))
#define ORCA_GRPC_REACTS(object) ((void)(object))
#endif

namespace orca::services {

template <typename Response>
class ServerStreamWriter : public grpc::ServerWriteReactor<Response>,
                           public std::enable_shared_from_this<ServerStreamWriter<Response>> {
 public:
  struct Options {
    /// Messages queued beyond the one in flight; when full, the oldest queued
    /// one is dropped (0 = unbounded). 1 keeps only the latest (heartbeats).
    size_t max_queued = 0;
  };

  ServerStreamWriter() : options_{} {}
  explicit ServerStreamWriter(Options options) : options_(options) {}
  ~ServerStreamWriter() override = default;

  /// Makes the writer own itself until OnDone. Call once, before returning
  /// the reactor from the RPC handler.
  void Begin() {
    absl::MutexLock lock(&mu_);
    self_ = this->shared_from_this();
    ORCA_GRPC_HANDS_OFF(this);
  }

  /// Queues `message`. False (dropped) once the stream is closing. Any
  /// thread; never blocks.
  bool Write(Response message) {
    {
      absl::MutexLock lock(&mu_);
      if (close_.has_value() || done_) return false;
      if (options_.max_queued > 0 && queue_.size() >= options_.max_queued) queue_.pop_front();
      queue_.push_back(std::move(message));
    }
    Pump();
    return true;
  }

  /// Ends the call with `status` once the queued messages are written.
  /// Only the first Close/CloseNow counts. Any thread.
  void Close(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (close_.has_value()) return;
      close_ = std::move(status);
    }
    Pump();
  }

  /// Ends the call with `status` now: queued messages are dropped (the write
  /// in flight, if any, completes first). Any thread.
  void CloseNow(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      queue_.clear();
      if (!close_.has_value()) close_ = std::move(status);
    }
    Pump();
  }

  // grpc::ServerWriteReactor:
  void OnWriteDone(bool ok) final {
    ORCA_GRPC_REACTS(this);
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {  // the client is gone: nothing more can be written
        queue_.clear();
        if (!close_.has_value()) close_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream broken");
      }
    }
    Pump();
  }
  void OnCancel() final {
    ORCA_GRPC_REACTS(this);
    OnCancelled();
    CloseNow(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }
  void OnDone() final {
    ORCA_GRPC_REACTS(this);
    std::shared_ptr<ServerStreamWriter> keep;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      queue_.clear();
      keep = std::move(self_);
    }
    OnFinished();
  }

 protected:
  /// The client cancelled (disconnect, deadline). Called once, before the
  /// writer closes itself.
  virtual void OnCancelled() {}
  /// The call is over (OnDone). The writer may be destroyed right after.
  virtual void OnFinished() {}

 private:
  // Starts the next write or the Finish, outside the lock (rule 6).
  //
  // gRPC serializes `current_` inside StartWrite, and the write's OnWriteDone may run on
  // another thread before StartWrite has returned here. So the next message goes into
  // `current_` (and the Finish is called) only once StartWrite has returned, ordered by the
  // lock: ThreadSanitizer sees that order too, where gRPC's own is inside Debian's
  // uninstrumented libgrpc. A Pump that finds the last StartWrite still running leaves the
  // work to the thread running it, which looks again when it returns (the loop). No Finish
  // is called before that return, so the writer is alive until then.
  void Pump() {
    for (;;) {
      // Holds the writer across Finish: gRPC reads the reactor inside Finish, and its OnDone
      // (which drops the writer's own reference) may run on another thread before Finish
      // returns. The last of the two references freed then frees the writer, ordered after
      // that read where ThreadSanitizer sees it (reference counts are atomics it sees).
      std::shared_ptr<ServerStreamWriter> keep;
      const Response* to_write = nullptr;
      std::optional<grpc::Status> to_finish;
      {
        absl::MutexLock lock(&mu_);
        if (writing_ || !start_returned_ || finished_ || done_) return;
        if (!queue_.empty()) {
          current_ = std::move(queue_.front());
          queue_.pop_front();
          writing_ = true;
          start_returned_ = false;
          to_write = &current_;  // untouched until OnWriteDone
        } else if (close_.has_value()) {
          finished_ = true;
          to_finish = *close_;
          keep = self_;
        } else {
          return;
        }
      }
      ORCA_GRPC_HANDS_OFF(this);
      if (to_finish.has_value()) {
        this->Finish(*to_finish);
        return;  // `keep` goes last: the writer may be freed here
      }
      this->StartWrite(to_write);
      absl::MutexLock lock(&mu_);
      start_returned_ = true;
    }
  }

  const Options options_;
  absl::Mutex mu_;
  std::shared_ptr<ServerStreamWriter> self_ ABSL_GUARDED_BY(mu_);
  std::deque<Response> queue_ ABSL_GUARDED_BY(mu_);
  Response current_;                                 // the message in flight; written only while no write is in flight
  bool start_returned_ ABSL_GUARDED_BY(mu_) = true;  // the last StartWrite has returned
  std::optional<grpc::Status> close_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace orca::services

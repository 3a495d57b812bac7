#pragma once
/// Request lifecycle states of the scheduler (ARCHITECTURE.md, "Request lifecycle").
///
///                 Submit()
///                    │
///                    ▼
///               ┌─────────┐  admitted: KV slots reserved (Algorithm 1: n_rsrv + kv_reservation_slots
///               │ QUEUED  │  <= n_slots) or, paged, the blocks of its first chunk allocated
///               └─────────┘──────────────────────────────────────────┐
///                 │  ▲                                               ▼
///                 │  │ preempted (paged KV: blocks ran  ┌───────────────────┐
///                 │  │ out; its KV is freed and it is   │ RUNNING           │
///                 │  │ recomputed from its prompt plus  │ (in flight in the │
///                 │  │ generated tokens when readmitted)│  pipeline)        │
///                 │  │   Schedule() picks it ──────────▶└───────────────────┘
///                 │  │        ▲                                    │ OnIterationDone()
///                 │  ┌┴───────┴───────────────┐   not finished     │
///                 │  │ WAITING_NEXT_ITERATION │◀───────────────────┤
///                 │  └────────────────────────┘                    │ stop token / length /
///                 │          │ Cancel / deadline / FailAll         │ cancel mark / failure
///                 ▼          ▼                                     ▼
///               ┌─────────────────────────────────────────────────────────┐
///               │ FINISHED_STOP | FINISHED_LENGTH | FINISHED_CANCELLED |  │
///               │ FINISHED_ERROR          (KV released on every path)     │
///               └─────────────────────────────────────────────────────────┘
///
/// A RUNNING request is inside the pipeline and is not selectable until its iteration
/// returns. Cancelling a RUNNING request only marks it; it finishes CANCELLED when its
/// iteration comes back (the token is discarded). Only a WAITING_NEXT_ITERATION request is
/// preempted (never one in flight); it goes back to QUEUED at its arrival position, keeping
/// the tokens it generated (already streamed).

#include <cstdint>

namespace orca::sched {

/// Engine-side request id: assigned by the scheduler at Submit, increasing in arrival order.
using RequestId = uint64_t;
/// Id of one scheduled iteration (one batch sent to the pipeline), increasing from 1.
using IterationId = uint64_t;

enum class RequestState : uint8_t {
  kQueued,                ///< In the pool, no KV held (not admitted yet, or preempted).
  kRunning,               ///< Admitted; its iteration is in flight in the pipeline.
  kWaitingNextIteration,  ///< Admitted; between iterations, selectable.
  kFinishedStop,          ///< Generated a stop or EOS token.
  kFinishedLength,        ///< Reached max_new_tokens or the context limit.
  kFinishedCancelled,     ///< Cancelled by the caller, a deadline or a drain.
  kFinishedError,         ///< Its iteration failed or the pipeline died.
};

/// Why a request finished, finer than the state (the wire maps it to FinishReason).
enum class FinishCause : uint8_t {
  kNone,              ///< Not finished.
  kStopToken,         ///< One of the request's stop_token_ids.
  kEosToken,          ///< One of the model's EOS ids (ignore_eos = false).
  kMaxNewTokens,      ///< Generated max_new_tokens.
  kContextLimit,      ///< prompt + generated reached the model's context.
  kCancelled,         ///< Cancel().
  kDeadlineExceeded,  ///< ExpireDeadlines() found it past its deadline.
  kError,             ///< OnIterationFailed() / FailAll() / engine returned nothing.
};

/// Phase of a scheduled request in one iteration (paper §3: initiation = prefill of the
/// whole prompt, or of a chunk of it with chunked prefill, or the recompute of a preempted
/// request; increment = one generated token).
enum class Phase : uint8_t { kInitiation, kIncrement };

inline bool IsFinished(RequestState state) {
  switch (state) {
    case RequestState::kQueued:
    case RequestState::kRunning:
    case RequestState::kWaitingNextIteration:
      return false;
    case RequestState::kFinishedStop:
    case RequestState::kFinishedLength:
    case RequestState::kFinishedCancelled:
    case RequestState::kFinishedError:
      return true;
  }
  return false;
}

/// True when the request holds a KV reservation (admitted and not finished).
inline bool IsAdmitted(RequestState state) {
  switch (state) {
    case RequestState::kRunning:
    case RequestState::kWaitingNextIteration:
      return true;
    case RequestState::kQueued:
    case RequestState::kFinishedStop:
    case RequestState::kFinishedLength:
    case RequestState::kFinishedCancelled:
    case RequestState::kFinishedError:
      return false;
  }
  return false;
}

/// The finished state a cause ends in.
inline RequestState FinishedStateFor(FinishCause cause) {
  switch (cause) {
    case FinishCause::kStopToken:
    case FinishCause::kEosToken:
      return RequestState::kFinishedStop;
    case FinishCause::kMaxNewTokens:
    case FinishCause::kContextLimit:
      return RequestState::kFinishedLength;
    case FinishCause::kCancelled:
    case FinishCause::kDeadlineExceeded:
      return RequestState::kFinishedCancelled;
    case FinishCause::kNone:
    case FinishCause::kError:
      return RequestState::kFinishedError;
  }
  return RequestState::kFinishedError;
}

inline const char* RequestStateName(RequestState state) {
  switch (state) {
    case RequestState::kQueued:
      return "QUEUED";
    case RequestState::kRunning:
      return "RUNNING";
    case RequestState::kWaitingNextIteration:
      return "WAITING_NEXT_ITERATION";
    case RequestState::kFinishedStop:
      return "FINISHED_STOP";
    case RequestState::kFinishedLength:
      return "FINISHED_LENGTH";
    case RequestState::kFinishedCancelled:
      return "FINISHED_CANCELLED";
    case RequestState::kFinishedError:
      return "FINISHED_ERROR";
  }
  return "UNKNOWN";
}

}  // namespace orca::sched

#pragma once
/// Conversions between the scheduler's plain records (core/sched), the
/// engine's step records (core/engine/step_records.h) and the worker control protocol
/// (orca.v1.ControlMessage / IterationResult). Services stay thin: this is
/// the only place that knows all three shapes.

#include <vector>

#include "core/engine/step_records.h"
#include "core/sched/scheduler_output.h"
#include "orca/v1/worker.pb.h"
#include "services/common/sampling_proto.h"

namespace orca::services {

/// Scheduler plan → the engine's in-process iteration input.
engine::StepInput PlanToStepInput(const sched::IterationPlan& plan);
/// Scheduler plan → wire control message.
void PlanToControlMessage(const sched::IterationPlan& plan, v1::ControlMessage* msg);
/// Wire control message → the engine's iteration input (on a worker).
engine::StepInput ControlMessageToStepInput(const v1::ControlMessage& msg);

/// Engine samples → scheduler results.
std::vector<sched::RequestResult> SamplesToResults(const std::vector<engine::SequenceSample>& tokens);
/// Engine samples → wire results (last stage).
void SamplesToProto(const std::vector<engine::SequenceSample>& tokens, v1::IterationResult* result);
/// Engine prompt logprobs → results: merged into the request's record, or a record of their own.
void AddPromptLogprobs(const std::vector<engine::PromptLogprobs>& records, std::vector<sched::RequestResult>* results);
/// Engine prompt logprobs → wire results (last stage), likewise.
void PromptLogprobsToProto(const std::vector<engine::PromptLogprobs>& records, v1::IterationResult* result);
/// Engine per-request failures → results: each becomes (or marks) the request's record.
void AddFailures(const std::vector<engine::RequestFailure>& failures, std::vector<sched::RequestResult>* results);
/// Engine per-request failures → wire results (last stage), likewise.
void FailuresToProto(const std::vector<engine::RequestFailure>& failures, v1::IterationResult* result);
/// Wire results → scheduler results.
std::vector<sched::RequestResult> ProtoToResults(const v1::IterationResult& result);

}  // namespace orca::services

#pragma once
/// Conversions between the scheduler's plain records (core/sched), the
/// engine's iteration records (core/engine) and the worker control protocol
/// (orca.v1.ControlMessage / IterationResult). Services stay thin: this is
/// the only place that knows all three shapes.

#include <vector>

#include "core/engine/engine.h"
#include "core/sched/scheduler_output.h"
#include "orca/v1/worker.pb.h"

namespace orca::services {

/// Scheduler plan → the engine's in-process iteration input.
IterationInput PlanToIterationInput(const sched::IterationPlan& plan);
/// Scheduler plan → wire control message.
void PlanToControlMessage(const sched::IterationPlan& plan, v1::ControlMessage* msg);
/// Wire control message → the engine's iteration input (on a worker).
IterationInput ControlMessageToIterationInput(const v1::ControlMessage& msg);

/// Engine samples → scheduler results.
std::vector<sched::RequestResult> SampledTokensToResults(const std::vector<orca::SampledToken>& tokens);
/// Engine samples → wire results (last stage).
void SampledTokensToProto(const std::vector<orca::SampledToken>& tokens, v1::IterationResult* result);
/// Wire results → scheduler results.
std::vector<sched::RequestResult> ProtoToResults(const v1::IterationResult& result);

SamplingParams SamplingFromProto(const v1::SamplingParams& p);
void SamplingToProto(const SamplingParams& s, v1::SamplingParams* p);

}  // namespace orca::services

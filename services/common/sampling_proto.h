#pragma once
/// The one conversion between SamplingParams (core/common) and their wire form,
/// orca.v1.SamplingParams, used by the gateway (requests it sends, its gRPC API)
/// and the scheduler and workers (requests and control messages they receive).
///
/// proto3 cannot tell an unset scalar from zero, so zero means "unset" where
/// zero is not a valid value: top_p 0 and repetition_penalty 0 become 1
/// (disabled), as the OpenAI API's defaults. Any other value is copied as is,
/// out-of-range ones included (a negative top_p, say), so that
/// SamplingParams::Validate rejects them naming the field instead of them
/// being silently replaced by a default (vLLM rejects top_p outside (0, 1]).
/// Every receiver validates what it converts, against the one table of ranges
/// (core/common/sampling_limits.h): the gateway's gRPC API, the scheduler's
/// Generate, and the engine once more.

#include "core/common/sampling_params.h"
#include "orca/v1/common.pb.h"

namespace orca::services {

/// Wire → plain; see above for what zero means. Does not validate.
SamplingParams SamplingFromProto(const v1::SamplingParams& proto);
/// Plain → wire (every field; the seed only when set).
void SamplingToProto(const SamplingParams& params, v1::SamplingParams* proto);
/// The structured-output part alone (an unknown kind reads as kNone = unconstrained).
void StructuredFromProto(const v1::StructuredOutput& proto, StructuredOutputSpec* spec);
void StructuredToProto(const StructuredOutputSpec& spec, v1::StructuredOutput* proto);

}  // namespace orca::services

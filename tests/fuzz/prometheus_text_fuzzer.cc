// A /metrics page as `orca bench` reads it from any server.
#include <cstdint>
#include <string>

#include "core/loadgen/prometheus_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto samples = orca::loadgen::ParsePrometheusText(std::string(reinterpret_cast<const char*>(data), size));
  if (samples.ok()) (void)orca::loadgen::SumSeries(*samples, "vllm:e2e_request_latency_seconds_count");
  return 0;
}

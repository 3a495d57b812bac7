#include "services/operator/event_recorder.h"

#include "core/common/logging.h"

namespace orca::k8s {

using nlohmann::json;

EventRecorder::EventRecorder(KubeClient* client, std::string component, std::string instance,
                             std::function<absl::Time()> clock)
    : client_(client), component_(std::move(component)), instance_(std::move(instance)), clock_(std::move(clock)) {}

absl::Status EventRecorder::Record(const json& object, const std::string& type, const std::string& reason,
                                   const std::string& message) {
  const json& meta = object.value("metadata", json::object());
  const std::string ns = meta.value("namespace", "default");
  const std::string now = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", clock_(), absl::UTCTimeZone());
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", meta.value("name", "object") + "."}, {"namespace", ns}}},
      {"involvedObject",
       {{"apiVersion", object.value("apiVersion", "")},
        {"kind", object.value("kind", "")},
        {"name", meta.value("name", "")},
        {"namespace", ns},
        {"uid", meta.value("uid", "")},
        {"resourceVersion", meta.value("resourceVersion", "")}}},
      {"type", type},
      {"reason", reason},
      // The API limits messages to 1 KiB.
      {"message", message.substr(0, 1024)},
      {"source", {{"component", component_}}},
      {"reportingComponent", component_},
      {"reportingInstance", instance_},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
  };
  auto created = client_->Create(ResourcePath("v1", "events", ns), event);
  if (!created.ok()) {
    ORCA_LOG(WARNING).With("reason", reason) << "could not record event: " << created.status().message();
  }
  return created.status();
}

}  // namespace orca::k8s

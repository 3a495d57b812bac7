#pragma once
/// A small Kubernetes REST client over libcurl: get, list, watch (streamed),
/// create, replace, server-side apply, delete. Objects are nlohmann::json.
///
/// Errors are absl::Status with a code mapped from the HTTP status (404
/// NotFound, 409 Aborted/AlreadyExists, 410 FailedPrecondition, 403
/// PermissionDenied, ...) and the API server's Status message; the HTTP code
/// itself is attached and read back with HttpCodeOf().
///
/// Thread-safe: every call uses its own curl handle.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "nlohmann/json.hpp"
#include "services/operator/kube_config.h"

namespace orca::k8s {

/// The HTTP status behind an error from KubeClient (0 when there was none, e.g. a connection failure).
int HttpCodeOf(const absl::Status& status);

/// An error as the client reports it for HTTP `code` with the API server's `message`.
absl::Status HttpError(int code, const std::string& reason, const std::string& message);

/// REST paths. `api_version` is "v1" (core) or "group/version".
/// Collection: /api/v1/namespaces/NS/services; object: .../services/NAME[/SUBRESOURCE].
/// An empty `namespace_` gives the all-namespaces collection.
std::string ResourcePath(const std::string& api_version, const std::string& plural, const std::string& namespace_,
                         const std::string& name = "", const std::string& subresource = "");

/// The plural resource name of the kinds the operator manages ("" if unknown).
std::string PluralForKind(const std::string& kind);

/// ResourcePath of a full object (apiVersion, kind, metadata.namespace/name).
absl::StatusOr<std::string> ObjectPath(const nlohmann::json& object);

struct ListOptions {
  std::string label_selector;
  std::string resource_version;
};

struct WatchOptions {
  std::string label_selector;
  /// Start after this resourceVersion (from the list).
  std::string resource_version;
  /// The server ends the watch after this long; the caller then re-watches.
  int timeout_seconds = 300;
  bool allow_bookmarks = true;
};

/// A watch event: type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
struct WatchEvent {
  std::string type;
  nlohmann::json object;
};

class KubeClient {
 public:
  struct Options {
    KubeConfig config;
    std::string user_agent = "orca-operator/0.1";
    /// Non-watch requests fail after this long.
    int request_timeout_seconds = 30;
  };

  static absl::StatusOr<std::unique_ptr<KubeClient>> Create(Options options);
  ~KubeClient();

  absl::StatusOr<nlohmann::json> Get(const std::string& path);
  /// GET of a collection; the result has `items` and `metadata.resourceVersion`.
  absl::StatusOr<nlohmann::json> List(const std::string& collection_path, const ListOptions& options = {});
  /// Streams a watch, calling `on_event` for each event until the server ends
  /// the stream (OK), `on_event` returns false (OK), `cancel` is notified
  /// (Cancelled) or an error occurs. A 410 Gone, as HTTP status or ERROR
  /// event, is returned as an error with HttpCodeOf() == 410.
  absl::Status Watch(const std::string& collection_path, const WatchOptions& options,
                     const std::function<bool(const WatchEvent&)>& on_event,
                     const absl::Notification* cancel = nullptr);
  absl::StatusOr<nlohmann::json> Create(const std::string& collection_path, const nlohmann::json& object);
  /// PUT: full replacement guarded by metadata.resourceVersion (409 on conflict).
  absl::StatusOr<nlohmann::json> Replace(const std::string& path, const nlohmann::json& object);
  /// Server-side apply (PATCH application/apply-patch+yaml) as `field_manager`, taking over conflicting fields.
  absl::StatusOr<nlohmann::json> Apply(const std::string& path, const nlohmann::json& object,
                                       const std::string& field_manager, bool force = true);
  absl::Status Delete(const std::string& path);

  const KubeConfig& config() const { return options_.config; }

 private:
  explicit KubeClient(Options options) : options_(std::move(options)) {}
  struct Response {
    long code = 0;
    std::string body;
  };
  // One HTTP exchange. `on_data` (if set) receives the body as it streams.
  absl::StatusOr<Response> Perform(const std::string& method, const std::string& path_and_query,
                                   const std::string& body, const std::string& content_type, int timeout_seconds,
                                   const std::function<bool(const char*, size_t, long code)>& on_data,
                                   const absl::Notification* cancel);
  absl::StatusOr<nlohmann::json> JsonCall(const std::string& method, const std::string& path_and_query,
                                          const std::string& body, const std::string& content_type);

  Options options_;
};

}  // namespace orca::k8s

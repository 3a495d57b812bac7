#pragma once
/// List + watch of one collection with a local cache, in the manner of
/// client-go's reflector/informer:
///
///   list ──▶ cache := items, rv := list rv ──▶ watch from rv ──┐
///     ▲                                                         │ ADDED/MODIFIED/DELETED: cache, rv, handler
///     │ 410 Gone (rv too old; HTTP or ERROR event)              │ BOOKMARK: rv only
///     └─────────────────────────────────────────────────────────┤ stream ended (timeout): watch again from rv
///                                      error: backoff (doubling, capped), watch again from rv
///
/// After every list the handler sees each object (ADDED) and a DELETED for
/// every cached object the list no longer holds, so no change is missed.

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "services/operator/kube_client.h"

namespace orca::k8s {

class Informer {
 public:
  struct Options {
    /// The collection, e.g. /apis/apps/v1/statefulsets or /api/v1/namespaces/NS/services.
    std::string collection_path;
    std::string label_selector;
    int watch_timeout_seconds = 300;
    absl::Duration initial_backoff = absl::Milliseconds(200);
    absl::Duration max_backoff = absl::Seconds(30);
  };
  /// Called on the informer's thread with ADDED, MODIFIED or DELETED and the object.
  using Handler = std::function<void(const std::string& type, const nlohmann::json& object)>;

  Informer(KubeClient* client, Options options, Handler handler);

  /// Lists and watches until `stop` is notified. Blocking; run it on its own thread.
  void Run(const absl::Notification* stop);

  /// True once the first list has filled the cache.
  bool HasSynced() const { return synced_.load(); }
  /// The cached object "namespace/name", or nullopt.
  std::optional<nlohmann::json> Get(const std::string& key) const;
  std::vector<nlohmann::json> List() const;
  /// Number of full lists so far (1 after the first sync; one more per 410).
  int64_t list_count() const { return list_count_.load(); }
  /// The resourceVersion the next watch starts from.
  std::string resource_version() const;

  /// "namespace/name" of an object.
  static std::string KeyOf(const nlohmann::json& object);

 private:
  absl::Status ListOnce();
  absl::Status WatchOnce(const absl::Notification* stop);
  void Store(const std::string& type, const nlohmann::json& object);

  KubeClient* client_;
  Options options_;
  Handler handler_;
  std::atomic<bool> synced_{false};
  std::atomic<int64_t> list_count_{0};
  mutable absl::Mutex mu_;
  std::map<std::string, nlohmann::json> cache_ ABSL_GUARDED_BY(mu_);
  std::string resource_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orca::k8s

#pragma once
/// An in-test Kubernetes API server on 127.0.0.1 (port 0) that implements the
/// calls orca-operator makes, with the API server's semantics where they matter:
///
///   GET    collection            list (labelSelector k=v,...), metadata.resourceVersion
///   GET    collection?watch=1    chunked stream of events after resourceVersion;
///                                ERROR 410 when that version was compacted away;
///                                BOOKMARK on SendBookmark(); ends on timeoutSeconds/EndWatches()
///   GET    object                404 when absent
///   POST   collection            create (generateName), 409 AlreadyExists
///   PUT    object[/status]       replace guarded by resourceVersion (409 Conflict);
///                                /status changes only .status, the rest only the rest
///   PATCH  object                server-side apply (application/apply-patch+yaml,
///                                fieldManager required): create or update, no-op
///                                when nothing changes (resourceVersion kept)
///   DELETE object                404 when absent
///
/// RBAC (SetRbacRules): every request is authorized as the API server's RBAC
/// authorizer would, from the rules of the Roles and ClusterRoles bound to the
/// client (verb from method and path: get/list/watch/create/update/patch/
/// delete/deletecollection; resource with its subresource, e.g.
/// orcadeployments/status; a server-side apply that creates also needs
/// create); anything not granted gets 403 Forbidden and is recorded.
///
/// Not implemented: field ownership/managedFields merging (apply replaces the
/// applied fields wholesale), defaulting, admission, authentication, TLS,
/// garbage collection, real controllers (tests set workload status by hand).

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace orca::k8s::testing {

class FakeKubeApiServer {
 public:
  /// One RBAC PolicyRule; `namespace_` "" = from a ClusterRole (applies everywhere).
  struct PolicyRule {
    std::vector<std::string> api_groups;
    std::vector<std::string> resources;
    std::vector<std::string> verbs;
    std::string namespace_;
  };
  /// The rules of Role and ClusterRole objects (other kinds are ignored).
  static std::vector<PolicyRule> RulesFromRoles(const std::vector<nlohmann::json>& roles);

  struct Request {
    std::string method;
    std::string path;
    std::string query;
    std::string content_type;
    std::string authorization;
    std::string body;
  };

  /// Starts serving on 127.0.0.1 with an ephemeral port.
  static std::unique_ptr<FakeKubeApiServer> Start();
  ~FakeKubeApiServer();

  /// http://127.0.0.1:PORT
  std::string url() const;

  /// Stores `object` as another client would (create or replace), at the path
  /// derived from apiVersion/kind/metadata; returns the stored object.
  nlohmann::json Upsert(const nlohmann::json& object);
  /// Sets .status of the object at `path` (simulating a controller).
  void SetStatus(const std::string& path, const nlohmann::json& status);
  /// Deletes the object at `path` (emits DELETED).
  void Remove(const std::string& path);
  std::optional<nlohmann::json> Get(const std::string& path) const;
  /// Objects under a collection path (e.g. /api/v1/namespaces/ns/events).
  std::vector<nlohmann::json> List(const std::string& collection_path) const;

  /// The next `times` requests whose method matches and whose path contains
  /// `path_part` get HTTP `code` with a Status body.
  void FailNext(const std::string& method, const std::string& path_part, int code, int times = 1);
  /// Forgets the event history: watches from older versions now get 410 Gone.
  void CompactHistory();
  /// Ends every open watch stream (as a server-side timeout would).
  void EndWatches();
  /// Sends a BOOKMARK with the current resourceVersion on every open watch.
  void SendBookmark();
  /// While held, new watch requests wait (unanswered) until released: lets a
  /// test change and compact history while a client's watch is certainly down.
  void HoldWatches(bool hold);

  /// From now on authorize every request against `rules` (nullopt: allow everything, the default).
  void SetRbacRules(std::optional<std::vector<PolicyRule>> rules);
  /// Requests refused with 403, as "verb group/resource in namespace" ("" group = core).
  std::vector<std::string> Denials() const;
  /// Every "verb group/resource" that was authorized and allowed (RBAC on).
  std::set<std::string> AllowedCalls() const;

  std::vector<Request> Requests() const;
  int CountRequests(const std::string& method, const std::string& path_part) const;
  /// Watches currently streaming.
  int OpenWatches() const;
  int64_t resource_version() const;

 private:
  struct Event {
    int64_t rv;
    std::string type;
    std::string collection;  // e.g. /apis/apps/v1|statefulsets
    std::string ns;
    nlohmann::json object;
  };
  struct Fault {
    std::string method;
    std::string path_part;
    int code;
    int times;
  };
  struct Response;
  class Connection;

  FakeKubeApiServer() = default;
  void AcceptLoop();
  void Serve(int fd);
  Response Handle(const Request& req);
  void StreamWatch(int fd, const Request& req);
  nlohmann::json StoreLocked(const std::string& path, nlohmann::json object, const std::string& type);
  // nullopt when RBAC allows `verb` on the request's resource; else the 403 message (and records it).
  std::optional<std::string> DenyLocked(const Request& req, const std::string& verb);
  void EmitLocked(const std::string& type, const std::string& path, const nlohmann::json& object);

  int listen_fd_ = -1;
  int port_ = 0;
  std::thread accept_thread_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool stopping_ = false;
  int64_t rv_ = 100;
  int64_t compacted_below_ = 0;
  int64_t watch_epoch_ = 0;  // EndWatches() bumps it
  bool hold_watches_ = false;
  int64_t bookmark_epoch_ = 0;  // SendBookmark() bumps it
  int open_watches_ = 0;
  int64_t name_counter_ = 0;
  std::map<std::string, nlohmann::json> objects_;  // object path -> object
  std::vector<Event> events_;
  std::vector<Fault> faults_;
  std::vector<Request> requests_;
  std::optional<std::vector<PolicyRule>> rbac_;
  std::vector<std::string> denials_;
  std::set<std::string> allowed_calls_;
  std::vector<int> connection_fds_;
  int active_connections_ = 0;
};

}  // namespace orca::k8s::testing

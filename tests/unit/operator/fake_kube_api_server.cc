#include "tests/unit/operator/fake_kube_api_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/operator/kube_client.h"

namespace orca::k8s::testing {

using nlohmann::json;

struct FakeKubeApiServer::Response {
  int code = 200;
  json body;
};

namespace {

struct ParsedPath {
  bool ok = false;
  std::string prefix;  // /api/v1 or /apis/group/version
  std::string ns;
  std::string plural;
  std::string name;
  std::string sub;
  std::string Collection() const { return prefix + "|" + plural; }
  std::string ObjectKey() const {
    return absl::StrCat(prefix, ns.empty() ? "" : "/namespaces/" + ns, "/", plural, "/", name);
  }
};

ParsedPath ParsePath(const std::string& path) {
  std::vector<std::string> seg = absl::StrSplit(path, '/', absl::SkipEmpty());
  ParsedPath p;
  size_t i = 0;
  if (seg.size() >= 2 && seg[0] == "api") {
    p.prefix = "/api/" + seg[1];
    i = 2;
  } else if (seg.size() >= 3 && seg[0] == "apis") {
    p.prefix = absl::StrCat("/apis/", seg[1], "/", seg[2]);
    i = 3;
  } else {
    return p;
  }
  if (i + 1 < seg.size() && seg[i] == "namespaces" && seg.size() > i + 2) {
    p.ns = seg[i + 1];
    i += 2;
  }
  if (i >= seg.size()) return p;
  p.plural = seg[i++];
  if (i < seg.size()) p.name = seg[i++];
  if (i < seg.size()) p.sub = seg[i++];
  p.ok = i == seg.size();
  return p;
}

std::string UrlDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(const std::string& query) {
  std::map<std::string, std::string> out;
  for (absl::string_view kv : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    out[UrlDecode(p.first)] = UrlDecode(p.second);
  }
  return out;
}

bool MatchesSelector(const json& object, const std::string& selector) {
  if (selector.empty()) return true;
  const json labels = object.value("metadata", json::object()).value("labels", json::object());
  for (absl::string_view term : absl::StrSplit(selector, ',', absl::SkipEmpty())) {
    std::string t(term);
    const size_t eq = t.find('=');
    const std::string key = t.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : t.substr(eq + 1);
    if (!value.empty() && value[0] == '=') value = value.substr(1);
    if (!labels.contains(key)) return false;
    if (eq != std::string::npos && labels[key] != value) return false;
  }
  return true;
}

json StatusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},   {"apiVersion", "v1"}, {"status", "Failure"},
          {"message", message}, {"reason", reason},   {"code", code}};
}

const char* ReasonPhrase(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 415:
      return "Unsupported Media Type";
    case 500:
      return "Internal Server Error";
    default:
      return "Status";
  }
}

std::string ReasonFor(int code) {
  switch (code) {
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 400:
      return "BadRequest";
    default:
      return "InternalError";
  }
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string Chunk(const std::string& data) {
  std::ostringstream os;
  os << std::hex << data.size() << "\r\n" << data << "\r\n";
  return os.str();
}

// The API group of a path prefix: "" for /api/v1, G for /apis/G/V.
std::string GroupOf(const std::string& prefix) {
  if (prefix.rfind("/apis/", 0) != 0) return "";
  const std::string rest = prefix.substr(6);
  return rest.substr(0, rest.find('/'));
}

bool Contains(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end() ||
         std::find(values.begin(), values.end(), "*") != values.end();
}

json WithoutStatus(json o) {
  o.erase("status");
  if (o.contains("metadata")) {
    for (const char* k : {"resourceVersion", "generation", "uid", "creationTimestamp", "managedFields"}) {
      o["metadata"].erase(k);
    }
  }
  return o;
}

}  // namespace

std::unique_ptr<FakeKubeApiServer> FakeKubeApiServer::Start() {
  std::unique_ptr<FakeKubeApiServer> server(new FakeKubeApiServer());
  server->listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(server->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(server->listen_fd_, 64) != 0) {
    return nullptr;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  server->port_ = ntohs(addr.sin_port);
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

FakeKubeApiServer::~FakeKubeApiServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (int fd : connection_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  changed_.notify_all();
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  // Connection threads are detached; wait for the last one to finish.
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return active_connections_ == 0; });
}

std::string FakeKubeApiServer::url() const { return absl::StrCat("http://127.0.0.1:", port_); }

void FakeKubeApiServer::AcceptLoop() {
  while (true) {
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    std::lock_guard<std::mutex> lock(mu_);
    if (fd < 0 || stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    connection_fds_.push_back(fd);
    ++active_connections_;
    std::thread([this, fd] { Serve(fd); }).detach();
  }
}

// Reads requests off one connection until it closes.
void FakeKubeApiServer::Serve(int fd) {
  std::string buffer;
  char chunk[8192];
  auto fill = [&]() {
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
    return true;
  };
  while (true) {
    size_t header_end;
    while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) goto done;
    }
    {
      std::istringstream head(buffer.substr(0, header_end));
      buffer.erase(0, header_end + 4);
      Request req;
      std::string target, version, line;
      head >> req.method >> target >> version;
      std::getline(head, line);
      size_t content_length = 0;
      bool expect_continue = false;
      while (std::getline(head, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(' '));
        if (name == "content-length" && !absl::SimpleAtoi(value, &content_length)) content_length = 0;
        if (name == "content-type") req.content_type = value;
        if (name == "authorization") req.authorization = value;
        if (name == "expect" && value == "100-continue") expect_continue = true;
      }
      if (expect_continue && !SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) break;
      while (buffer.size() < content_length) {
        if (!fill()) goto done;
      }
      req.body = buffer.substr(0, content_length);
      buffer.erase(0, content_length);
      const size_t q = target.find('?');
      req.path = target.substr(0, q);
      req.query = q == std::string::npos ? "" : target.substr(q + 1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req);
      }
      if (req.method == "GET" && ParseQuery(req.query).count("watch")) {
        StreamWatch(fd, req);
        break;  // a watch ends its connection
      }
      Response res = Handle(req);
      const std::string body = res.body.dump();
      const std::string head_out =
          absl::StrCat("HTTP/1.1 ", res.code, " ", ReasonPhrase(res.code),
                       "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n");
      if (!SendAll(fd, head_out + body)) break;
    }
  }
done:
  std::lock_guard<std::mutex> lock(mu_);
  connection_fds_.erase(std::remove(connection_fds_.begin(), connection_fds_.end(), fd), connection_fds_.end());
  ::close(fd);
  --active_connections_;
  changed_.notify_all();
}

void FakeKubeApiServer::EmitLocked(const std::string& type, const std::string& path, const json& object) {
  const ParsedPath p = ParsePath(path);
  events_.push_back({rv_, type, p.Collection(), p.ns, object});
  changed_.notify_all();
}

json FakeKubeApiServer::StoreLocked(const std::string& path, json object, const std::string& type) {
  object["metadata"]["resourceVersion"] = std::to_string(++rv_);
  objects_[path] = object;
  EmitLocked(type, path, object);
  return object;
}

std::vector<FakeKubeApiServer::PolicyRule> FakeKubeApiServer::RulesFromRoles(const std::vector<json>& roles) {
  std::vector<PolicyRule> out;
  auto strings = [](const json& v) {
    std::vector<std::string> list;
    if (v.is_array()) {
      for (const json& s : v) {
        if (s.is_string()) list.push_back(s.get<std::string>());
      }
    }
    return list;
  };
  for (const json& role : roles) {
    const std::string kind = role.value("kind", "");
    if (kind != "Role" && kind != "ClusterRole") continue;
    const std::string ns = kind == "Role" ? role["metadata"].value("namespace", "default") : "";
    for (const json& rule : role.value("rules", json::array())) {
      out.push_back({strings(rule.value("apiGroups", json())), strings(rule.value("resources", json())),
                     strings(rule.value("verbs", json())), ns});
    }
  }
  return out;
}

std::optional<std::string> FakeKubeApiServer::DenyLocked(const Request& req, const std::string& verb) {
  if (!rbac_) return std::nullopt;
  const ParsedPath p = ParsePath(req.path);
  const std::string group = GroupOf(p.prefix);
  const std::string resource = p.sub.empty() ? p.plural : p.plural + "/" + p.sub;
  for (const PolicyRule& rule : *rbac_) {
    if (!rule.namespace_.empty() && rule.namespace_ != p.ns) continue;  // a Role grants only in its namespace
    if (Contains(rule.api_groups, group) && Contains(rule.resources, resource) && Contains(rule.verbs, verb)) {
      allowed_calls_.insert(absl::StrCat(verb, " ", group, "/", resource));
      return std::nullopt;
    }
  }
  const std::string where = p.ns.empty() ? "at the cluster scope" : "in the namespace \"" + p.ns + "\"";
  denials_.push_back(absl::StrCat(verb, " ", group, "/", resource, " ", p.ns.empty() ? "(cluster)" : p.ns));
  return absl::StrCat(p.plural, group.empty() ? "" : "." + group, " is forbidden: User \"system:serviceaccount:test\" ",
                      "cannot ", verb, " resource \"", resource, "\" in API group \"", group, "\" ", where);
}

FakeKubeApiServer::Response FakeKubeApiServer::Handle(const Request& req) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Fault& f : faults_) {
    if (f.times > 0 && f.method == req.method && req.path.find(f.path_part) != std::string::npos) {
      --f.times;
      return {f.code, StatusBody(f.code, ReasonFor(f.code), "injected fault")};
    }
  }
  const ParsedPath p = ParsePath(req.path);
  if (!p.ok && p.plural.empty()) return {404, StatusBody(404, "NotFound", "no such path " + req.path)};
  const auto query = ParseQuery(req.query);
  const std::string key = p.ObjectKey();
  const char* verb = req.method == "GET"      ? (p.name.empty() ? "list" : "get")
                     : req.method == "POST"   ? "create"
                     : req.method == "PUT"    ? "update"
                     : req.method == "PATCH"  ? "patch"
                     : req.method == "DELETE" ? (p.name.empty() ? "deletecollection" : "delete")
                                              : "unknown";
  if (auto denied = DenyLocked(req, verb)) return {403, StatusBody(403, "Forbidden", *denied)};

  if (req.method == "GET" && p.name.empty()) {
    json items = json::array();
    for (const auto& [path, obj] : objects_) {
      const ParsedPath op = ParsePath(path);
      if (op.Collection() != p.Collection() || (!p.ns.empty() && op.ns != p.ns)) continue;
      if (!MatchesSelector(obj, query.count("labelSelector") ? query.at("labelSelector") : "")) continue;
      items.push_back(obj);
    }
    return {200,
            {{"kind", "List"},
             {"apiVersion", "v1"},
             {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
             {"items", items}}};
  }
  auto it = objects_.find(key);
  if (req.method == "GET") {
    if (it == objects_.end()) return {404, StatusBody(404, "NotFound", p.plural + " \"" + p.name + "\" not found")};
    return {200, it->second};
  }
  if (req.method == "DELETE") {
    if (it == objects_.end()) return {404, StatusBody(404, "NotFound", p.plural + " \"" + p.name + "\" not found")};
    json gone = it->second;
    objects_.erase(it);
    gone["metadata"]["resourceVersion"] = std::to_string(++rv_);
    EmitLocked("DELETED", key, gone);
    return {200, StatusBody(200, "", "deleted")};
  }
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return {400, StatusBody(400, "BadRequest", "body is not a JSON object")};

  if (req.method == "POST") {
    json& meta = body["metadata"];
    if (!meta.contains("name")) meta["name"] = absl::StrCat(meta.value("generateName", "obj-"), ++name_counter_);
    ParsedPath op = p;
    op.name = meta["name"].get<std::string>();
    if (objects_.count(op.ObjectKey())) {
      return {409, StatusBody(409, "AlreadyExists", p.plural + " \"" + op.name + "\" already exists")};
    }
    meta["uid"] = absl::StrCat("uid-", ++name_counter_);
    meta["generation"] = 1;
    meta["creationTimestamp"] = "2024-01-01T00:00:00Z";
    return {201, StoreLocked(op.ObjectKey(), body, "ADDED")};
  }
  if (req.method == "PUT") {
    if (it == objects_.end()) return {404, StatusBody(404, "NotFound", p.plural + " \"" + p.name + "\" not found")};
    const std::string want_rv = body.value("metadata", json::object()).value("resourceVersion", "");
    const std::string have_rv = it->second["metadata"].value("resourceVersion", "");
    if (!want_rv.empty() && want_rv != have_rv) {
      return {409, StatusBody(
                       409, "Conflict",
                       "the object has been modified; please apply your changes to the latest version and try again")};
    }
    json next = it->second;
    if (p.sub == "status") {
      next["status"] = body.value("status", json::object());
    } else {
      const json status = next.value("status", json());
      const json old_meta = next["metadata"];
      next = body;
      for (const char* k : {"uid", "creationTimestamp", "generation"}) {
        if (old_meta.contains(k)) next["metadata"][k] = old_meta[k];
      }
      if (!status.is_null()) next["status"] = status;
      if (next.value("spec", json()) != it->second.value("spec", json())) {
        next["metadata"]["generation"] = old_meta.value("generation", 1) + 1;
      }
    }
    return {200, StoreLocked(key, next, "MODIFIED")};
  }
  if (req.method == "PATCH") {
    if (req.content_type != "application/apply-patch+yaml") {
      return {415, StatusBody(415, "UnsupportedMediaType", "only server-side apply is implemented")};
    }
    if (!query.count("fieldManager") || query.at("fieldManager").empty()) {
      return {400, StatusBody(400, "BadRequest", "PATCH, fieldManager: Required value: is required for apply patch")};
    }
    if (it == objects_.end()) {
      // Creating through apply is authorized as create too (the API server's createValidation).
      if (auto denied = DenyLocked(req, "create")) return {403, StatusBody(403, "Forbidden", *denied)};
      body["metadata"]["uid"] = absl::StrCat("uid-", ++name_counter_);
      body["metadata"]["generation"] = 1;
      body["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z";
      body.erase("status");
      return {201, StoreLocked(key, body, "ADDED")};
    }
    json next = body;
    next["metadata"]["uid"] = it->second["metadata"]["uid"];
    next["metadata"]["creationTimestamp"] = it->second["metadata"]["creationTimestamp"];
    int64_t generation = it->second["metadata"].value("generation", 1);
    if (WithoutStatus(next) == WithoutStatus(it->second)) return {200, it->second};  // no-op apply
    if (next.value("spec", json()) != it->second.value("spec", json())) ++generation;
    next["metadata"]["generation"] = generation;
    if (it->second.contains("status")) next["status"] = it->second["status"];
    return {200, StoreLocked(key, next, "MODIFIED")};
  }
  return {405, StatusBody(405, "MethodNotAllowed", req.method)};
}

void FakeKubeApiServer::StreamWatch(int fd, const Request& req) {
  const auto query = ParseQuery(req.query);
  const ParsedPath p = ParsePath(req.path);
  const std::string selector = query.count("labelSelector") ? query.at("labelSelector") : "";
  int64_t timeout_s = 300;
  if (query.count("timeoutSeconds") && !absl::SimpleAtoi(query.at("timeoutSeconds"), &timeout_s)) timeout_s = 300;
  int64_t since = 0;
  if (query.count("resourceVersion") && !absl::SimpleAtoi(query.at("resourceVersion"), &since)) since = 0;
  const bool bookmarks = query.count("allowWatchBookmarks") && query.at("allowWatchBookmarks") == "true";
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (auto denied = DenyLocked(req, "watch")) {
      const std::string body = StatusBody(403, "Forbidden", *denied).dump();
      lock.unlock();
      SendAll(fd, absl::StrCat("HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ",
                               body.size(), "\r\nConnection: close\r\n\r\n", body));
      return;
    }
  }
  if (!SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")) return;

  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return !hold_watches_ || stopping_; });
  for (Fault& f : faults_) {
    if (f.times > 0 && f.method == "WATCH" && req.path.find(f.path_part) != std::string::npos) {
      --f.times;
      const std::string line =
          json{{"type", "ERROR"}, {"object", StatusBody(f.code, ReasonFor(f.code), "injected")}}.dump() + "\n";
      lock.unlock();
      SendAll(fd, Chunk(line) + "0\r\n\r\n");
      return;
    }
  }
  if (since < compacted_below_) {
    const std::string line =
        json{{"type", "ERROR"},
             {"object", StatusBody(410, "Expired",
                                   absl::StrCat("too old resource version: ", since, " (", compacted_below_, ")"))}}
            .dump() +
        "\n";
    lock.unlock();
    SendAll(fd, Chunk(line) + "0\r\n\r\n");
    return;
  }
  ++open_watches_;
  const int64_t epoch = watch_epoch_;
  int64_t bookmark_seen = bookmark_epoch_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int64_t last = since;
  bool alive = true;
  while (alive && !stopping_ && watch_epoch_ == epoch && std::chrono::steady_clock::now() < deadline) {
    std::string out;
    for (const Event& e : events_) {
      if (e.rv <= last || e.collection != p.Collection() || (!p.ns.empty() && e.ns != p.ns)) continue;
      last = e.rv;
      if (!MatchesSelector(e.object, selector)) continue;
      out += Chunk(json{{"type", e.type}, {"object", e.object}}.dump() + "\n");
    }
    if (bookmarks && bookmark_seen != bookmark_epoch_) {
      bookmark_seen = bookmark_epoch_;
      last = std::max(last, rv_);
      out += Chunk(json{{"type", "BOOKMARK"},
                        {"object", {{"kind", "Bookmark"}, {"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}}
                       .dump() +
                   "\n");
    }
    if (!out.empty()) {
      lock.unlock();
      alive = SendAll(fd, out);
      lock.lock();
      continue;
    }
    changed_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(200)));
  }
  --open_watches_;
  lock.unlock();
  if (alive) SendAll(fd, "0\r\n\r\n");
}

json FakeKubeApiServer::Upsert(const json& object) {
  auto path = ObjectPath(object);
  std::lock_guard<std::mutex> lock(mu_);
  json stored = object;
  auto it = objects_.find(*path);
  if (it == objects_.end()) {
    if (!stored["metadata"].contains("uid")) stored["metadata"]["uid"] = absl::StrCat("uid-", ++name_counter_);
    if (!stored["metadata"].contains("generation")) stored["metadata"]["generation"] = 1;
    stored["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z";
    return StoreLocked(*path, stored, "ADDED");
  }
  stored["metadata"]["uid"] = it->second["metadata"]["uid"];
  int64_t generation = it->second["metadata"].value("generation", 1);
  if (stored.value("spec", json()) != it->second.value("spec", json())) ++generation;
  stored["metadata"]["generation"] = generation;
  if (!stored.contains("status") && it->second.contains("status")) stored["status"] = it->second["status"];
  return StoreLocked(*path, stored, "MODIFIED");
}

void FakeKubeApiServer::SetStatus(const std::string& path, const json& status) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return;
  json next = it->second;
  next["status"] = status;
  StoreLocked(path, next, "MODIFIED");
}

void FakeKubeApiServer::Remove(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return;
  json gone = it->second;
  objects_.erase(it);
  gone["metadata"]["resourceVersion"] = std::to_string(++rv_);
  EmitLocked("DELETED", path, gone);
}

std::optional<json> FakeKubeApiServer::Get(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> FakeKubeApiServer::List(const std::string& collection_path) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  for (const auto& [path, obj] : objects_) {
    if (path.rfind(collection_path + "/", 0) == 0) out.push_back(obj);
  }
  return out;
}

void FakeKubeApiServer::FailNext(const std::string& method, const std::string& path_part, int code, int times) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.push_back({method, path_part, code, times});
}

void FakeKubeApiServer::CompactHistory() {
  std::lock_guard<std::mutex> lock(mu_);
  compacted_below_ = rv_ + 1;
  events_.clear();
}

void FakeKubeApiServer::EndWatches() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++watch_epoch_;
  }
  changed_.notify_all();
}

void FakeKubeApiServer::HoldWatches(bool hold) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_watches_ = hold;
  }
  changed_.notify_all();
}

void FakeKubeApiServer::SendBookmark() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++bookmark_epoch_;
  }
  changed_.notify_all();
}

void FakeKubeApiServer::SetRbacRules(std::optional<std::vector<PolicyRule>> rules) {
  std::lock_guard<std::mutex> lock(mu_);
  rbac_ = std::move(rules);
}

std::vector<std::string> FakeKubeApiServer::Denials() const {
  std::lock_guard<std::mutex> lock(mu_);
  return denials_;
}

std::set<std::string> FakeKubeApiServer::AllowedCalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allowed_calls_;
}

std::vector<FakeKubeApiServer::Request> FakeKubeApiServer::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

int FakeKubeApiServer::CountRequests(const std::string& method, const std::string& path_part) const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(std::count_if(requests_.begin(), requests_.end(), [&](const Request& r) {
    return r.method == method && r.path.find(path_part) != std::string::npos;
  }));
}

int FakeKubeApiServer::OpenWatches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_watches_;
}

int64_t FakeKubeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

}  // namespace orca::k8s::testing

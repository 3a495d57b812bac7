// orca-operator: reconciles OrcaDeployment objects into the gateway, scheduler
// and worker workloads (see renderer.h for the topology).
//
//   orca-operator                          in-cluster, all namespaces, leader election
//   orca-operator --kubeconfig ~/.kube/config --namespace demo --no-leader-elect
//   orca-operator --render deploy/examples/orca-cpu-tiny.yaml   print the objects and exit

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "services/operator/controller.h"
#include "services/operator/event_recorder.h"
#include "services/operator/json_yaml.h"
#include "services/operator/leader_elector.h"
#include "services/operator/operator_admin_server.h"
#include "services/operator/orca_deployment_spec.h"
#include "services/operator/renderer.h"

namespace orca::k8s {
namespace {

struct Flags {
  std::string kubeconfig;
  std::string context;
  std::string namespace_;
  bool leader_elect = true;
  std::string leader_election_namespace;
  std::string leader_election_id = "orca-operator-leader";
  std::string http_listen = "0.0.0.0:8080";
  std::string cluster_domain = "cluster.local";
  std::string field_manager = "orca-operator";
  int64_t resync_seconds = 300;
  int64_t watch_timeout_seconds = 300;
  std::string log_format = "text";
  std::string log_level = "info";
  std::string render;
  std::string render_format = "yaml";
};

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// --render: print the objects each OrcaDeployment in `path` becomes.
absl::Status Render(const Flags& flags) {
  ORCA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(flags.render));
  ORCA_ASSIGN_OR_RETURN(std::vector<nlohmann::json> docs, ParseYamlDocuments(text));
  RenderOptions options;
  options.cluster_domain = flags.cluster_domain;
  nlohmann::json all = nlohmann::json::array();
  for (const nlohmann::json& doc : docs) {
    if (!doc.is_object() || doc.value("kind", "") != kKind) continue;
    auto parsed = ParseOrcaDeployment(doc);
    if (!parsed.ok()) return Annotate(parsed.status(), flags.render);
    for (nlohmann::json& obj : RenderDesiredObjects(*parsed, options)) all.push_back(std::move(obj));
  }
  if (all.empty()) return absl::InvalidArgumentError(absl::StrCat(flags.render, ": no OrcaDeployment found"));
  if (flags.render_format == "json") {
    std::cout << all.dump(2) << "\n";
  } else {
    for (const nlohmann::json& obj : all) std::cout << "---\n" << ToYaml(obj);
  }
  return absl::OkStatus();
}

absl::Status Run(const Flags& flags) {
  KubeClient::Options client_options;
  if (flags.kubeconfig.empty()) {
    ORCA_ASSIGN_OR_RETURN(client_options.config, LoadInClusterConfig());
  } else {
    ORCA_ASSIGN_OR_RETURN(client_options.config, LoadKubeConfigFile(flags.kubeconfig, flags.context));
  }
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<KubeClient> client, KubeClient::Create(client_options));

  // SIGTERM/SIGINT end the process cleanly (the Lease is released).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::Notification stop;
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (!stop.HasBeenNotified()) {
      ORCA_LOG(INFO) << "signal " << sig << ": shutting down";
      stop.Notify();
    }
  });

  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  const std::string identity = EnvOr("POD_NAME", absl::StrCat(host, "-", getpid()));
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<OperatorMetrics> metrics, OperatorMetrics::Create());
  metrics->SetLeader(!flags.leader_elect);
  EventRecorder events(client.get(), "orca-operator", identity);
  Controller::Options controller_options;
  controller_options.namespace_ = flags.namespace_;
  controller_options.reconciler.field_manager = flags.field_manager;
  controller_options.reconciler.render.cluster_domain = flags.cluster_domain;
  controller_options.resync_period = absl::Seconds(flags.resync_seconds);
  controller_options.watch_timeout_seconds = static_cast<int>(flags.watch_timeout_seconds);
  Controller controller(client.get(), &events, metrics.get(), controller_options);

  std::atomic<bool> leading{!flags.leader_elect};
  OperatorAdminServer::Options admin_options;
  admin_options.listen_address = flags.http_listen;
  admin_options.metrics = [&metrics] { return metrics->Render(); };
  admin_options.readiness = [&]() -> absl::Status {
    if (!leading.load()) return absl::OkStatus();  // a healthy standby
    return controller.HasSynced() ? absl::OkStatus() : absl::UnavailableError("informers have not synced yet");
  };
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<OperatorAdminServer> admin, OperatorAdminServer::Start(admin_options));
  ORCA_LOG(INFO)
          .With("server", client_options.config.server)
          .With("namespace", flags.namespace_.empty() ? "*" : flags.namespace_)
      << "orca-operator started; admin HTTP on port " << admin->port();

  absl::Status result = absl::OkStatus();
  std::thread controller_thread;
  if (!flags.leader_elect) {
    controller_thread = std::thread([&] { controller.Run(&stop); });
  } else {
    LeaderElector::Options le;
    le.namespace_ = flags.leader_election_namespace.empty()
                        ? EnvOr("POD_NAMESPACE",
                                client_options.config.namespace_.empty() ? "default" : client_options.config.namespace_)
                        : flags.leader_election_namespace;
    le.lease_name = flags.leader_election_id;
    le.identity = identity;
    LeaderElector elector(client.get(), le);
    elector.Run(
        &stop,
        [&] {
          leading = true;
          metrics->SetLeader(true);
          controller_thread = std::thread([&] { controller.Run(&stop); });
        },
        [&] {
          metrics->SetLeader(false);
          result = absl::AbortedError("lost the leader Lease; exiting so that a fresh replica campaigns");
          if (!stop.HasBeenNotified()) stop.Notify();
        });
  }
  if (!flags.leader_elect) stop.WaitForNotification();
  if (controller_thread.joinable()) controller_thread.join();
  admin->Stop();
  if (!stop.HasBeenNotified()) stop.Notify();
  kill(getpid(), SIGTERM);  // wake the signal thread (the signal is blocked, so sigwait takes it)
  signal_thread.join();
  return result;
}

}  // namespace
}  // namespace orca::k8s

int main(int argc, char** argv) {
  using orca::k8s::Flags;
  Flags f;
  orca::FlagSet flags("orca-operator", "Reconciles OrcaDeployment (serving.orca.dev/v1alpha1) objects.");
  flags.AddString("kubeconfig", &f.kubeconfig, "kubeconfig path; empty = in-cluster service account");
  flags.AddString("context", &f.context, "kubeconfig context; empty = current-context");
  flags.AddString("namespace", &f.namespace_, "watch one namespace (empty = all)");
  flags.AddBool("leader-elect", &f.leader_elect, "Lease-based leader election (run several replicas for HA)");
  flags.AddString("leader-election-namespace", &f.leader_election_namespace,
                  "namespace of the Lease; empty = $POD_NAMESPACE, else the kubeconfig's, else default");
  flags.AddString("leader-election-id", &f.leader_election_id, "name of the Lease");
  flags.AddString("http-listen", &f.http_listen, "/healthz, /readyz, /metrics");
  flags.AddString("cluster-domain", &f.cluster_domain, "cluster DNS suffix used in stage and scheduler addresses");
  flags.AddString("field-manager", &f.field_manager, "server-side apply field manager");
  flags.AddInt("resync-seconds", &f.resync_seconds, "re-reconcile every OrcaDeployment this often");
  flags.AddInt("watch-timeout-seconds", &f.watch_timeout_seconds, "server-side timeout of each watch request");
  flags.AddString("log-format", &f.log_format, "text or json");
  flags.AddString("log-level", &f.log_level, "debug, info, warning or error");
  flags.AddString("render", &f.render, "print the objects the OrcaDeployment(s) in this file become, then exit");
  flags.AddString("render-format", &f.render_format, "yaml or json (with --render)");
  flags.EnableConfigFile();
  if (absl::Status st = flags.Parse(argc, argv); !st.ok()) {
    std::cerr << "orca-operator: " << st.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  orca::SetLogComponent("operator");
  if (f.log_format == "json") orca::SetLogFormat(orca::LogFormat::kJson);
  orca::LogLevel level;
  if (!orca::ParseLogLevel(f.log_level, &level)) {
    std::cerr << "orca-operator: --log-level must be debug, info, warning or error\n";
    return 2;
  }
  orca::SetLogLevel(level);
  if (f.resync_seconds < 1 || f.watch_timeout_seconds < 1) {
    std::cerr << "orca-operator: --resync-seconds and --watch-timeout-seconds must be >= 1\n";
    return 2;
  }
  if (f.render_format != "yaml" && f.render_format != "json") {
    std::cerr << "orca-operator: --render-format must be yaml or json\n";
    return 2;
  }
  absl::Status st = f.render.empty() ? orca::k8s::Run(f) : orca::k8s::Render(f);
  if (!st.ok()) {
    std::cerr << "orca-operator: " << st.message() << "\n";
    return 1;
  }
  return 0;
}

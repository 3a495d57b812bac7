#pragma once
/// A TCP forwarder on 127.0.0.1:0 in front of another address, for fault
/// tests: Kill() makes the target look like a process that was killed — every
/// connection through the proxy is reset (RST, as the kernel does for a dead
/// process's sockets with unread data) and new connections are refused.
///
///   auto proxy = TcpProxy::Start(scheduler->port());
///   gateway options.schedulers = {proxy->address()};
///   ... proxy->Kill();   // the gateway sees "Connection reset by peer"

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace orca::gateway::testing {

class TcpProxy {
 public:
  /// Listens on 127.0.0.1:0 and forwards each connection to 127.0.0.1:`target_port`.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const;
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  /// Resets every open connection and closes the listener. Returns once done.
  void Kill();
  /// Connections accepted so far.
  int64_t num_accepted() const;

 private:
  class Impl;
  explicit TcpProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orca::gateway::testing

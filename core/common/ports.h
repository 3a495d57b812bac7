#pragma once
/// Loopback ports for processes a parent starts itself (`orca serve`, `orca
/// bench`, integration tests). The pick avoids the kernel's ephemeral range,
/// where outgoing connections (gRPC clients, peers) take their local ports, and
/// never hands the same port out twice in one process, so ports picked one
/// after another for several children cannot collide with each other.

#include "absl/status/statusor.h"

namespace orca {

/// A TCP port on 127.0.0.1 that nothing is bound to right now and that this
/// process has not handed out before.
absl::StatusOr<int> PickLoopbackPort();

}  // namespace orca

#pragma once
/// Status-propagation macros in the style of Abseil/Google code.
///
///   ORCA_RETURN_IF_ERROR(DoThing());
///   ORCA_ASSIGN_OR_RETURN(auto value, ComputeValue());
///   ORCA_ASSIGN_OR_RETURN(existing_var, ComputeValue());

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ORCA_STATUS_CONCAT_INNER_(a, b) a##b
#define ORCA_STATUS_CONCAT_(a, b) ORCA_STATUS_CONCAT_INNER_(a, b)

#define ORCA_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status orca_status_ = (expr);        \
    if (!orca_status_.ok()) return orca_status_; \
  } while (0)

#define ORCA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

#define ORCA_ASSIGN_OR_RETURN(lhs, expr) \
  ORCA_ASSIGN_OR_RETURN_IMPL_(ORCA_STATUS_CONCAT_(orca_statusor_, __LINE__), lhs, expr)

/// Adds context in front of an error message, keeping its code.
namespace orca {
inline absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), std::string(context) + ": " + std::string(status.message()));
}
}  // namespace orca

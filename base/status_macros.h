// Status plumbing shared by every tandem package.
//
// tandem returns errors as absl::Status / absl::StatusOr<T> across library
// boundaries (no exceptions, no exit()). These two macros keep the happy path
// readable:
//
//   absl::StatusOr<Tensor> Forward(const Tensor& x) {
//     TANDEM_ASSIGN_OR_RETURN(Tensor h, MatMul(x, w_));
//     TANDEM_RETURN_IF_ERROR(CheckFinite(h));
//     return Relu(h);
//   }
//
// Both evaluate `expr` exactly once and return the error unchanged, so the
// message written at the failure site (what, where, which rank) reaches the
// caller intact.
#ifndef TANDEM_BASE_STATUS_MACROS_H_
#define TANDEM_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TANDEM_STATUS_CONCAT_INNER_(a, b) a##b
#define TANDEM_STATUS_CONCAT_(a, b) TANDEM_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define TANDEM_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status tandem_status_ = (expr);          \
    if (!tandem_status_.ok()) return tandem_status_; \
  } while (false)

// `lhs` may be a declaration (`Tensor t`) or an existing variable.
#define TANDEM_ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(           \
      TANDEM_STATUS_CONCAT_(tandem_statusor_, __LINE__), lhs, expr)

#define TANDEM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return statusor.status();            \
  lhs = std::move(statusor).value()

#endif  // TANDEM_BASE_STATUS_MACROS_H_

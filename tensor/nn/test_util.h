// Status assertions for tandem::nn and tandem::optim tests (test-only).
//
//   TANDEM_NN_ASSERT_OK(model.LoadStateDict(state));
//   TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, model.Forward(x));
//
// Both fail the current test with the Status message and return from it.
#ifndef TANDEM_TENSOR_NN_TEST_UTIL_H_
#define TANDEM_TENSOR_NN_TEST_UTIL_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

#define TANDEM_NN_TEST_CONCAT_INNER_(a, b) a##b
#define TANDEM_NN_TEST_CONCAT_(a, b) TANDEM_NN_TEST_CONCAT_INNER_(a, b)

#define TANDEM_NN_ASSERT_OK(expr)                                 \
  do {                                                            \
    const ::absl::Status tandem_test_status_ = (expr);            \
    ASSERT_TRUE(tandem_test_status_.ok()) << tandem_test_status_; \
  } while (false)

#define TANDEM_NN_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  TANDEM_NN_ASSERT_OK_AND_ASSIGN_IMPL_(           \
      TANDEM_NN_TEST_CONCAT_(tandem_test_statusor_, __LINE__), lhs, expr)

#define TANDEM_NN_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                         \
  ASSERT_TRUE(statusor.ok()) << statusor.status();                \
  lhs = std::move(statusor).value()

#endif  // TANDEM_TENSOR_NN_TEST_UTIL_H_

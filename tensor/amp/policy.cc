#include "tensor/amp/policy.h"

namespace tandem::amp {
namespace {

struct Entry {
  AmpOp op;
  const char* name;
  CastPolicy policy;
};

// Indexed by AmpOp; the static_assert below keeps it complete and ordered.
constexpr Entry kTable[] = {
    {AmpOp::kMatMul, "matmul", CastPolicy::kLowerPrecision},
    {AmpOp::kLinear, "linear", CastPolicy::kLowerPrecision},
    {AmpOp::kConv2d, "conv2d", CastPolicy::kLowerPrecision},
    {AmpOp::kAdd, "add", CastPolicy::kPromote},
    {AmpOp::kSub, "sub", CastPolicy::kPromote},
    {AmpOp::kMul, "mul", CastPolicy::kPromote},
    {AmpOp::kDiv, "div", CastPolicy::kPromote},
    {AmpOp::kUnary, "unary", CastPolicy::kPromote},
    {AmpOp::kMaxPool2d, "max_pool2d", CastPolicy::kPromote},
    {AmpOp::kSoftmax, "softmax", CastPolicy::kF32},
    {AmpOp::kLogSoftmax, "log_softmax", CastPolicy::kF32},
    {AmpOp::kSum, "sum", CastPolicy::kF32},
    {AmpOp::kMean, "mean", CastPolicy::kF32},
    {AmpOp::kCrossEntropy, "cross_entropy", CastPolicy::kF32},
    {AmpOp::kMse, "mse_loss", CastPolicy::kF32},
};

constexpr bool Ordered() {
  int i = 0;
  for (const Entry& e : kTable) {
    if (static_cast<int>(e.op) != i++) return false;
  }
  return i == kNumAmpOps;
}
static_assert(Ordered(), "kTable must list every AmpOp in enum order");

}  // namespace

CastPolicy PolicyFor(AmpOp op) { return kTable[static_cast<int>(op)].policy; }
const char* AmpOpName(AmpOp op) { return kTable[static_cast<int>(op)].name; }

}  // namespace tandem::amp

#include "tensor/amp/autocast.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/fiber_local.h"
#include "base/status_macros.h"
#include "tensor/amp/policy.h"
#include "tensor/tensor_impl.h"

namespace tandem::amp {
namespace {

bool IsLow(DType d) { return d == DType::kF16 || d == DType::kBF16; }

const char* DeviceTypeName(DeviceType t) {
  return t == DeviceType::kCUDA ? "cuda" : "cpu";
}

// This thread's cast cache and region depth. The entry keeps the source
// tensor alive, so its TensorImpl address can't be reused by another
// tensor while the entry exists.
struct ThreadCache {
  int64_t depth = 0;
  struct Entry {
    Tensor source;
    Tensor cast;
  };
  std::map<std::pair<const TensorImpl*, DType>, Entry> entries;
};

ThreadCache& Cache() {
  thread_local ThreadCache cache;
  return cache;
}

// A rank's autocast regions and cast cache follow it when ranks are fibers
// (base/fiber_local.h).
[[maybe_unused]] const bool kCacheIsFiberLocal =
    base::RegisterFiberLocal<ThreadCache>(&Cache, ThreadCache());

// PyTorch's cached_cast: f32 leaves that require grad (parameters) are cast
// once per region; everything else is cast at each use.
absl::StatusOr<Tensor> CastToLow(const Tensor& t, DType dtype) {
  if (!(t.requires_grad() && t.is_leaf())) return t.To(dtype);
  ThreadCache& cache = Cache();
  const auto key = std::make_pair(t.impl().get(), dtype);
  auto it = cache.entries.find(key);
  if (it != cache.entries.end()) return it->second.cast;
  TANDEM_ASSIGN_OR_RETURN(Tensor cast, t.To(dtype));
  cache.entries.emplace(key, ThreadCache::Entry{t, cast});
  return cast;
}

DType Widest(const std::vector<Tensor>& inputs) {
  bool f64 = false, f32 = false, f16 = false, bf16 = false;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    f64 |= t.dtype() == DType::kF64;
    f32 |= t.dtype() == DType::kF32;
    f16 |= t.dtype() == DType::kF16;
    bf16 |= t.dtype() == DType::kBF16;
  }
  if (f64) return DType::kF64;
  if (f32 || (f16 && bf16)) return DType::kF32;
  return f16 ? DType::kF16 : DType::kBF16;
}

}  // namespace

absl::Status Autocast::Check(DeviceType device, DType dtype) {
  if (IsLow(dtype) &&
      (device == DeviceType::kCPU || device == DeviceType::kCUDA)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "Autocast: device ", DeviceTypeName(device), " cannot autocast to ",
      DTypeName(dtype), "; autocast dtypes are bf16 and f16"));
}

Autocast::Autocast(DeviceType device, DType dtype, bool enabled)
    : device_(device),
      dtype_(dtype),
      enabled_(enabled),
      status_(Check(device, dtype)) {
  if (!status_.ok()) return;
  installed_ = true;
  ++Cache().depth;
  previous_ = internal::ExchangeAutocast(device_, enabled_ ? this : nullptr);
}

Autocast::~Autocast() {
  if (!installed_) return;
  internal::ExchangeAutocast(device_, previous_);
  ThreadCache& cache = Cache();
  if (--cache.depth == 0) cache.entries.clear();
}

absl::StatusOr<bool> Autocast::CastInputs(AmpOp op,
                                          std::vector<Tensor>& inputs) {
  bool changed = false;
  const CastPolicy policy = PolicyFor(op);
  const DType widest = Widest(inputs);
  for (Tensor& t : inputs) {
    if (!t.defined() || !IsFloatingPoint(t.dtype())) continue;
    DType target = t.dtype();
    switch (policy) {
      case CastPolicy::kLowerPrecision:
        // PyTorch leaves f64 alone; f32 (and the other low dtype) go down.
        if (t.dtype() != DType::kF64) target = dtype_;
        break;
      case CastPolicy::kF32:
        if (IsLow(t.dtype())) target = DType::kF32;
        break;
      case CastPolicy::kPromote:
        target = widest;
        break;
    }
    if (target == t.dtype()) continue;
    if (policy == CastPolicy::kLowerPrecision) {
      TANDEM_ASSIGN_OR_RETURN(t, CastToLow(t, target));
    } else {
      TANDEM_ASSIGN_OR_RETURN(t, t.To(target));
    }
    changed = true;
  }
  return changed;
}

bool IsAutocastEnabled(DeviceType device) {
  return internal::CurrentAutocast(device) != nullptr;
}

int64_t CastCacheSize() { return static_cast<int64_t>(Cache().entries.size()); }

int64_t CastCacheBytes() {
  int64_t bytes = 0;
  for (const auto& [key, entry] : Cache().entries) {
    bytes += entry.cast.numel() * DTypeSize(entry.cast.dtype());
  }
  return bytes;
}

}  // namespace tandem::amp

#include "train/parallel/core/virtual_world.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/ops.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {

absl::StatusOr<VirtualWorld> PlaceVirtualWorld(int64_t virtual_world,
                                               int world_size, int rank) {
  if (virtual_world < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--virtual_world=", virtual_world,
                     ": the virtual world size must be >= 1 (or 0: off)"));
  }
  if (virtual_world == 0) return VirtualWorld{.first = rank};
  TANDEM_RETURN_IF_ERROR(CheckVirtualWorld(virtual_world, world_size));
  const int64_t local = virtual_world / world_size;
  return VirtualWorld{
      .size = virtual_world, .first = rank * local, .local = local};
}

absl::StatusOr<std::vector<double>> GatherVirtualRankValues(
    comm::Communicator& comm, Device device, const VirtualWorld& vw,
    absl::Span<const double> local) {
  if (static_cast<int64_t>(local.size()) != vw.local) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GatherVirtualRankValues on rank ", comm.rank(), ": ", local.size(),
        " values for the ", vw.local, " virtual ranks this rank plays"));
  }
  std::vector<double> out(local.size() * comm.size());
  TANDEM_RETURN_IF_ERROR(
      AllGatherF64Bits(comm, device, local, absl::MakeSpan(out)));
  return out;
}

double CanonicalTreeSumF64(absl::Span<const double> values) {
  if (values.size() == 1) return values[0];
  const size_t mid = values.size() / 2;
  return CanonicalTreeSumF64(values.subspan(0, mid)) +
         CanonicalTreeSumF64(values.subspan(mid));
}

absl::StatusOr<std::unique_ptr<VirtualGradSum>> VirtualGradSum::Create(
    comm::Communicator& comm, const VirtualWorld& vw,
    std::vector<Tensor> params, bool grads_in_place) {
  if (!vw.on()) {
    return absl::InvalidArgumentError(
        "VirtualGradSum: the virtual world is off (K = 0)");
  }
  if (params.empty()) {
    return absl::InvalidArgumentError(
        "VirtualGradSum: no parameters to sum the gradients of");
  }
  const DType dtype = params[0].dtype();
  int64_t numel = 0;
  for (const Tensor& p : params) {
    if (p.dtype() != dtype || (dtype != DType::kF32 && dtype != DType::kF64)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--virtual_world on rank ", comm.rank(),
          ": the gradients are summed in f32 or f64, one dtype for the whole "
          "model; found ",
          DTypeName(params[0].dtype()), " and ", DTypeName(p.dtype()),
          ": keep the parameters in f32 (autocast computes in low "
          "precision)"));
    }
    numel += p.numel();
  }
  std::unique_ptr<VirtualGradSum> sum(new VirtualGradSum(
      comm, vw, std::move(params), dtype, numel, grads_in_place));
  TreeAccumulator::Allocator allocate = nullptr;
  if (sum->in_place_) {
    VirtualGradSum* self = sum.get();
    allocate = [self](int64_t bytes) { return self->NewBuffer(bytes); };
  }
  TANDEM_ASSIGN_OR_RETURN(
      TreeAccumulator tree,
      TreeAccumulator::Create(vw.local, dtype, numel, std::move(allocate)));
  sum->sum_.emplace(std::move(tree));
  return sum;
}

VirtualGradSum::VirtualGradSum(comm::Communicator& comm, const VirtualWorld& vw,
                               std::vector<Tensor> params, DType dtype,
                               int64_t numel, bool grads_in_place)
    : comm_(comm),
      vw_(vw),
      params_(std::move(params)),
      dtype_(dtype),
      numel_(numel),
      in_place_(grads_in_place),
      // K a power of two: 1/K is exact, so scaling the sum gives the bits
      // of summing the scaled gradients (DDP's kAvg, ddp.cc) in one pass.
      scale_after_(VirtualScaleAfterSum(vw.size)) {
  for (const Tensor& p : params_) {
    if (p.device() != Device::CPU()) in_place_ = false;
  }
}

bool VirtualScaleAfterSum(int64_t virtual_world) {
  return virtual_world > 0 && (virtual_world & (virtual_world - 1)) == 0;
}

absl::StatusOr<void*> VirtualGradSum::NewBuffer(int64_t bytes) {
  const int64_t n = bytes / DTypeSize(dtype_);
  TANDEM_ASSIGN_OR_RETURN(Tensor flat,
                          Tensor::Zeros({n}, dtype_, Device::CPU()));
  std::vector<Tensor> views;
  int64_t offset = 0;
  for (const Tensor& p : params_) {
    TANDEM_ASSIGN_OR_RETURN(Tensor view, flat.View(offset, p.shape()));
    views.push_back(std::move(view));
    offset += p.numel();
  }
  void* data = flat.raw_data();
  flats_.push_back(std::move(flat));
  views_.push_back(std::move(views));
  return data;
}

absl::Status VirtualGradSum::BindGrads(const void* data, bool mark_zero) {
  int b = 0;
  while (b < static_cast<int>(flats_.size()) && flats_[b].raw_data() != data) {
    ++b;
  }
  if (b == static_cast<int>(flats_.size())) {
    return absl::InternalError(
        absl::StrCat("VirtualGradSum on rank ", comm_.rank(),
                     ": the tree's buffer is not one of this sum's (a bug)"));
  }
  if (b != bound_ || !grads_bound()) {
    for (size_t i = 0; i < params_.size(); ++i) {
      TANDEM_RETURN_IF_ERROR(params_[i].set_grad(views_[b][i]));
    }
    bound_ = b;
  }
  if (mark_zero) {
    for (const Tensor& p : params_) p.MarkGradZero();
  }
  return absl::OkStatus();
}

bool VirtualGradSum::grads_bound() const {
  if (bound_ < 0) return false;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].GradIsViewOf(views_[bound_][i])) return false;
  }
  return true;
}

absl::Status VirtualGradSum::Fold() {
  if (sum_->added() == sum_->leaves()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "VirtualGradSum on rank ", comm_.rank(), ": all ", vw_.local,
        " virtual ranks of this step were folded; Reduce first"));
  }
  const double scale = 1.0 / static_cast<double>(vw_.size);
  if (!in_place_) return FoldCopying(scale);
  TANDEM_ASSIGN_OR_RETURN(void* next, sum_->NextLeafBuffer());
  if (grads_bound() && flats_[bound_].raw_data() == next) {
    for (const Tensor& p : params_) {
      // grad() writes the zeros of a gradient this backward never reached.
      Tensor g = p.grad();
      if (!scale_after_) TANDEM_RETURN_IF_ERROR(ScaleInPlace(g, scale));
    }
    TANDEM_RETURN_IF_ERROR(sum_->AddWritten());
  } else {
    TANDEM_RETURN_IF_ERROR(FoldCopying(scale));
  }
  if (sum_->added() == sum_->leaves()) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(next, sum_->NextLeafBuffer());
  return BindGrads(next, /*mark_zero=*/true);
}

absl::Status VirtualGradSum::FoldCopying(double scale) {
  const int64_t size = DTypeSize(dtype_);
  // The gradients are read where they are (CPU); a device's are copied to
  // the host first, a missing one reads zeros.
  std::vector<TreeAccumulator::Piece> pieces;
  int64_t offset = 0;
  for (const Tensor& p : params_) {
    const int64_t n = p.numel();
    Tensor g = p.grad();
    if (!g.defined()) {
      if (static_cast<int64_t>(zeros_.size()) < n * size) {
        zeros_.assign(n * size, 0);
      }
      pieces.push_back({zeros_.data(), n});
    } else {
      // DDP's scaling of a rank's gradient before its all-reduce.
      if (!scale_after_) TANDEM_RETURN_IF_ERROR(ScaleInPlace(g, scale));
      if (g.device() != Device::CPU()) {
        if (host_.size() < static_cast<size_t>(numel_ * size)) {
          host_.resize(numel_ * size);
        }
        TANDEM_ASSIGN_OR_RETURN(const Tensor h, g.To(Device::CPU()));
        std::memcpy(host_.data() + offset * size, h.raw_data(), n * size);
        pieces.push_back({host_.data() + offset * size, n});
      } else {
        pieces.push_back({g.raw_data(), n});
      }
    }
    offset += n;
  }
  return sum_->AddPieces(pieces);
}

absl::Status VirtualGradSum::Reduce() {
  if (sum_->added() != sum_->leaves()) {
    return absl::FailedPreconditionError(
        absl::StrCat("VirtualGradSum on rank ", comm_.rank(), ": ",
                     sum_->leaves() - sum_->added(), " of the ", vw_.local,
                     " virtual ranks this rank plays were not folded yet"));
  }
  // The rank's subtree, completed in place by the tree over ranks.
  TANDEM_ASSIGN_OR_RETURN(void* sum, sum_->mutable_result());
  TANDEM_RETURN_IF_ERROR(comm::OrderedAllReduce(
      comm_, comm::HostView(sum, numel_, dtype_), &workspace_));
  const double scale = 1.0 / static_cast<double>(vw_.size);
  if (in_place_) {
    // The grads view the sum; it stays theirs until the next step's first
    // backward writes there (Reset makes it the next leaf's buffer).
    TANDEM_RETURN_IF_ERROR(BindGrads(sum, /*mark_zero=*/false));
    if (scale_after_) {
      for (const Tensor& p : params_) {
        TANDEM_RETURN_IF_ERROR(ScaleInPlace(p.grad(), scale));
      }
    }
    sum_->Reset();
    return absl::OkStatus();
  }
  const char* in = static_cast<const char*>(sum);
  for (const Tensor& p : params_) {
    const int64_t bytes = p.nbytes();
    Tensor g = p.grad();
    if (!g.defined()) {
      TANDEM_ASSIGN_OR_RETURN(g, Tensor::Zeros(p.shape(), dtype_, p.device()));
      TANDEM_RETURN_IF_ERROR(p.set_grad(g));
    }
    if (g.device() == Device::CPU()) {
      std::memcpy(g.raw_data(), in, bytes);
    } else {
      TANDEM_ASSIGN_OR_RETURN(
          const Tensor host,
          Tensor::FromBuffer(in, p.numel(), dtype_, p.shape()));
      TANDEM_RETURN_IF_ERROR(g.CopyFrom(host));
    }
    if (scale_after_) TANDEM_RETURN_IF_ERROR(ScaleInPlace(g, scale));
    in += bytes;
  }
  sum_->Reset();
  return absl::OkStatus();
}

}  // namespace tandem::train

#include "tensor/replicate.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops/internal.h"
#include "tensor/tensor_impl.h"

namespace tandem {

absl::Status ReplicateInto(const Tensor& source, const Tensor& replica) {
  if (!source.defined() || !replica.defined()) {
    return absl::InvalidArgumentError(
        "ReplicateInto: the source and the replica must be defined tensors");
  }
  if (source.shape() != replica.shape() || source.dtype() != replica.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReplicateInto: the replica is ", internal::Describe(replica),
        " but the source is ", internal::Describe(source),
        "; a replica must have its source's shape and dtype (build the "
        "replica module with the same constructor arguments)"));
  }
  const Device device = replica.device();
  TensorImpl& impl = *replica.impl();
  if (source.device() == device) {
    impl.storage = source.storage();
    impl.offset = source.storage_offset();
  } else {
    TANDEM_ASSIGN_OR_RETURN(Tensor copy, source.To(device));
    impl.storage = copy.storage();
    impl.offset = copy.storage_offset();
  }
  impl.grad = Tensor();
  impl.grad_marked_zero = false;
  impl.grad_fn = nullptr;
  impl.requires_grad = false;
  const Device from = source.device();
  RecordOp("Broadcast", replica, {source},
           [from](const Tensor& g, GradSink& sink) -> absl::Status {
             if (g.device() == from) return sink.Add(0, g);
             TANDEM_ASSIGN_OR_RETURN(Tensor moved, g.To(from));
             return sink.Add(0, std::move(moved));
           });
  return absl::OkStatus();
}

}  // namespace tandem

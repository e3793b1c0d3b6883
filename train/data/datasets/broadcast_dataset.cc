#include "train/data/datasets/broadcast_dataset.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/tensor.h"
#include "train/parallel/core/tensor_comm.h"

namespace tandem::train {
namespace {

// The header rank 0 sends first: whether it loaded, the features' dtype
// and shape, the number of labels.
enum HeaderField : int64_t {
  kLoaded = 0,
  kFeatureDType,
  kFeatureRank,
  kFeatureDims,  // kMaxBroadcastFeatureDims entries
  kLabelCount = kFeatureDims + kMaxBroadcastFeatureDims,
  kHeaderSize,
};

absl::Status BroadcastTensor(comm::Communicator& comm, const Tensor& t,
                             const std::string& path, const char* what) {
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(t));
  absl::Status s = comm.Broadcast(view, /*root=*/0)->Wait();
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("sharing ", what, " of ", path,
                                             " read by rank 0: ", s.message()));
}

}  // namespace

absl::StatusOr<bool> Rank0Says(comm::Communicator& comm, bool value) {
  TANDEM_ASSIGN_OR_RETURN(Tensor flag, Tensor::Zeros({1}, DType::kI64));
  flag.data<int64_t>()[0] = value ? 1 : 0;
  TANDEM_RETURN_IF_ERROR(
      BroadcastTensor(comm, flag, "the input", "whether it is a pipe"));
  return flag.data<int64_t>()[0] != 0;
}

absl::StatusOr<TensorDataset> LoadOnRank0AndBroadcast(
    comm::Communicator& comm, const std::string& path,
    const std::function<absl::StatusOr<TensorDataset>()>& load) {
  TANDEM_ASSIGN_OR_RETURN(Tensor header,
                          Tensor::Zeros({kHeaderSize}, DType::kI64));
  int64_t* h = header.data<int64_t>();
  absl::StatusOr<TensorDataset> loaded =
      absl::InternalError("not loaded on this rank");
  if (comm.rank() == 0) {
    loaded = load();
    if (loaded.ok() && loaded->features.ndim() > kMaxBroadcastFeatureDims) {
      loaded = absl::InvalidArgumentError(absl::StrCat(
          path, ": features of ", loaded->features.ndim(),
          " dimensions; at most ", kMaxBroadcastFeatureDims,
          " can be shared from rank 0 (save the input to a regular file)"));
    }
    if (loaded.ok()) {
      h[kLoaded] = 1;
      h[kFeatureDType] = static_cast<int64_t>(loaded->features.dtype());
      h[kFeatureRank] = loaded->features.ndim();
      for (int64_t d = 0; d < loaded->features.ndim(); ++d) {
        h[kFeatureDims + d] = loaded->features.dim(d);
      }
      h[kLabelCount] = loaded->labels.numel();
    }
  }
  TANDEM_RETURN_IF_ERROR(BroadcastTensor(comm, header, path, "the size"));
  if (h[kLoaded] == 0) {
    if (comm.rank() == 0) return loaded.status();
    return absl::FailedPreconditionError(
        absl::StrCat("rank 0 could not read ", path,
                     " (a pipe only rank 0 reads; rank 0's error says why)"));
  }
  Tensor features, labels;
  if (comm.rank() == 0) {
    features = loaded->features;
    labels = loaded->labels;
  } else {
    std::vector<int64_t> shape(h + kFeatureDims,
                               h + kFeatureDims + h[kFeatureRank]);
    TANDEM_ASSIGN_OR_RETURN(
        features, Tensor::Zeros(shape, static_cast<DType>(h[kFeatureDType])));
    TANDEM_ASSIGN_OR_RETURN(labels,
                            Tensor::Zeros({h[kLabelCount]}, DType::kI64));
  }
  TANDEM_RETURN_IF_ERROR(BroadcastTensor(comm, features, path, "the features"));
  TANDEM_RETURN_IF_ERROR(BroadcastTensor(comm, labels, path, "the labels"));
  if (comm.rank() == 0) return *std::move(loaded);
  return TensorDataset::Create(std::move(features), std::move(labels));
}

}  // namespace tandem::train

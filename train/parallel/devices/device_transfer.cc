#include "train/parallel/devices/device_transfer.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"

namespace tandem::train {
namespace {

std::string Describe(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()), " on ",
                      t.device().ToString());
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ChunkSizes(int64_t rows, int64_t chunks) {
  if (rows < 0 || chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", rows, " rows into ", chunks,
                     " chunks: the rows must be >= 0 and the chunks >= 1"));
  }
  std::vector<int64_t> sizes;
  if (rows == 0) return sizes;
  const int64_t each = (rows + chunks - 1) / chunks;
  for (int64_t start = 0; start < rows; start += each) {
    sizes.push_back(std::min(each, rows - start));
  }
  return sizes;
}

absl::StatusOr<std::vector<int64_t>> TensorSplitSizes(int64_t rows,
                                                      int64_t sections) {
  if (rows < 0 || sections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", rows, " rows into ", sections,
                     " sections: the rows must be >= 0 and the sections >= 1"));
  }
  std::vector<int64_t> sizes(static_cast<size_t>(sections), rows / sections);
  for (int64_t i = 0; i < rows % sections; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

absl::StatusOr<std::vector<Tensor>> SplitRows(const Tensor& x,
                                              absl::Span<const int64_t> sizes) {
  if (!x.defined() || x.ndim() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "splitting rows needs a tensor with at least one dim, got ",
        x.defined() ? Describe(x) : "an undefined tensor"));
  }
  int64_t total = 0;
  for (int64_t rows : sizes) total += rows;
  if (total != x.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot split ", Describe(x), " into pieces of ",
        absl::StrJoin(sizes, ", "), " rows (", total,
        " in all); the pieces must cover its ", x.dim(0), " rows"));
  }
  const int64_t row = x.dim(0) == 0 ? 0 : x.numel() / x.dim(0);
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (int64_t rows : sizes) {
    Shape shape = x.shape();
    shape[0] = rows;
    TANDEM_ASSIGN_OR_RETURN(Tensor piece, x.View(offset * row, shape));
    out.push_back(std::move(piece));
    offset += rows;
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> ChunkRows(const Tensor& x, int64_t chunks) {
  if (!x.defined() || x.ndim() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ChunkRows needs a tensor with at least one dim, got ",
                     x.defined() ? Describe(x) : "an undefined tensor"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                          ChunkSizes(x.dim(0), chunks));
  return SplitRows(x, sizes);
}

absl::StatusOr<Tensor> CopyToDevice(const Tensor& x, Device device) {
  if (!x.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyToDevice(", device.ToString(), "): the tensor is undefined"));
  }
  if (x.device() == device) return x;
  TANDEM_ASSIGN_OR_RETURN(Tensor out, x.To(device));
  const Device from = x.device();
  RecordOp("CopyToDevice", out, {x},
           [from](const Tensor& g, GradSink& sink) -> absl::Status {
             TANDEM_ASSIGN_OR_RETURN(Tensor back, g.To(from));
             return sink.Add(0, std::move(back));
           });
  return out;
}

absl::StatusOr<Tensor> GatherRows(absl::Span<const Tensor> pieces,
                                  Device device) {
  if (pieces.empty()) {
    return absl::InvalidArgumentError("GatherRows: no pieces to gather");
  }
  const Tensor& first = pieces[0];
  Shape shape = first.shape();
  if (!first.defined() || shape.empty()) {
    return absl::InvalidArgumentError(
        "GatherRows: piece 0 must be a defined tensor with at least one dim");
  }
  int64_t rows = 0;
  std::vector<int64_t> offsets;
  const int64_t row = NumelOf(Shape(shape.begin() + 1, shape.end())).value();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Tensor& p = pieces[i];
    const bool same_row_shape =
        p.defined() && p.ndim() == first.ndim() &&
        std::equal(shape.begin() + 1, shape.end(), p.shape().begin() + 1);
    if (!same_row_shape || p.dtype() != first.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GatherRows: piece ", i, " is ",
          p.defined() ? Describe(p) : "undefined", " but piece 0 is ",
          Describe(first),
          "; the pieces must agree in dtype and in every dim but the first"));
    }
    offsets.push_back(rows * row);
    rows += p.dim(0);
  }
  shape[0] = rows;
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty(shape, first.dtype(), device));
  for (size_t i = 0; i < pieces.size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(Tensor region,
                            out.View(offsets[i], pieces[i].shape()));
    TANDEM_RETURN_IF_ERROR(region.CopyFrom(pieces[i]));
  }
  std::vector<Tensor> inputs(pieces.begin(), pieces.end());
  std::vector<Shape> shapes;
  std::vector<Device> devices;
  for (const Tensor& p : pieces) {
    shapes.push_back(p.shape());
    devices.push_back(p.device());
  }
  RecordOp("Gather", out, std::move(inputs),
           [offsets, shapes, devices](const Tensor& g,
                                      GradSink& sink) -> absl::Status {
             for (size_t i = 0; i < offsets.size(); ++i) {
               const int idx = static_cast<int>(i);
               if (!sink.needs(idx)) continue;
               TANDEM_ASSIGN_OR_RETURN(Tensor part,
                                       g.View(offsets[i], shapes[i]));
               TANDEM_ASSIGN_OR_RETURN(Tensor moved, part.To(devices[i]));
               TANDEM_RETURN_IF_ERROR(sink.Add(idx, std::move(moved)));
             }
             return absl::OkStatus();
           });
  return out;
}

}  // namespace tandem::train

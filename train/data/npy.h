// Reading and writing NumPy's .npy format (versions 1.0, 2.0 and 3.0).
//
//   TANDEM_ASSIGN_OR_RETURN(Tensor x, LoadNpy("features.npy"));  // [N, 64] f32
//   TANDEM_ASSIGN_OR_RETURN(Tensor y, LoadNpy("labels.npy"));    // [N] i64
//
// Supported element types: little-endian float32 ('<f4'), float64 ('<f8'),
// int64 ('<i8') and int32 ('<i4'), in C order. Anything else (Fortran order,
// big-endian data, object arrays, a truncated file, a malformed header) is an
// error naming the file, the byte offset and what was wrong (a text or gzip
// file passed as .npy is named as such, with the loader to use); nothing
// partly read is returned. Format reference: numpy.lib.format.
#ifndef TANDEM_TRAIN_DATA_NPY_H_
#define TANDEM_TRAIN_DATA_NPY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensor/tensor.h"

namespace tandem::train {

// Whether `bytes` starts with NumPy's magic string "\x93NUMPY": lets a CSV
// reader say "this is a .npy file" instead of failing on the first value.
bool LooksLikeNpy(absl::string_view bytes);

// Reads a whole .npy file into a new CPU tensor.
absl::StatusOr<Tensor> LoadNpy(const std::string& path);

// Parses .npy bytes already in memory; `name` is used in error messages.
absl::StatusOr<Tensor> ParseNpy(const std::string& bytes,
                                const std::string& name);

// Writes a CPU tensor (f32, f64, i64 or i32) as a version 1.0 .npy file,
// byte-identical to numpy.save of the same array.
absl::Status SaveNpy(const std::string& path, const Tensor& tensor);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_NPY_H_

// The safetensors file format (Hugging Face's, the one PyTorch users exchange
// weights in), read and written.
//
//   nn::StateDict state = model->StateDict();   // "0.weight", "0.bias", ...
//   TANDEM_RETURN_IF_ERROR(SaveSafetensors("/ckpt/model.safetensors", state,
//                                          {{"format", "pt"}}));
//   ...
//   TANDEM_RETURN_IF_ERROR(
//       LoadModuleFromSafetensors("/ckpt/model.safetensors", *model));
//
// Layout (https://github.com/huggingface/safetensors, "Format"):
//   8 bytes    N, the header's length, unsigned little-endian
//   N bytes    a JSON object: for each tensor name
//                {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}
//              and optionally "__metadata__": {string: string}; padded with
//              spaces to a multiple of 8 bytes (what safetensors >= 0.3
//              writes, so the data that follows is aligned)
//   the rest   the tensors' bytes, row-major, little-endian; [b, e) is
//              relative to the start of this section. Readers (the
//              reference one included) require the ranges to tile it exactly.
// dtypes: F32, F64, F16, BF16, I64, I32 (tandem's DTypes); other dtypes of
// the format (U8, BOOL, F8...) are rejected by name. The host is assumed
// little-endian (x86-64, aarch64), like the tensors in memory.
//
// Names are kept as given: a module's StateDict() names are PyTorch's
// state_dict() names, so torch's load_state_dict accepts a tandem file and
// vice versa (train/examples/safetensors_interop_test.cc checks both ways).
//
// Thread-safety: pure functions of their arguments; the file functions block
// on disk I/O.
#ifndef TANDEM_TRAIN_CHECKPOINT_SAFETENSORS_H_
#define TANDEM_TRAIN_CHECKPOINT_SAFETENSORS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/nn/module.h"

namespace tandem::train::checkpoint {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsContent {
  // In file order (ascending data offsets): for files tandem wrote, the order
  // they were given in. CPU tensors owning fresh storage.
  nn::StateDict tensors;
  Metadata metadata;  // "__metadata__"; empty when absent
};

// The format's dtype name ("F32", "BF16", ...).
std::string_view SafetensorsDTypeName(DType dtype);
// The dtype of such a name; nullopt for a name tandem does not support
// (F32, F64, F16, BF16, I64 and I32 are).
std::optional<DType> SafetensorsDTypeFromName(std::string_view name);

// The file's bytes for `tensors` (any device: non-CPU tensors are copied to
// the host) and `metadata`. InvalidArgument for an undefined tensor, an empty
// or duplicate name, or the reserved name "__metadata__".
absl::StatusOr<std::string> EncodeSafetensors(const nn::StateDict& tensors,
                                              const Metadata& metadata = {});

// Parses a file's bytes. `source` (the path) starts every error message.
// Every way a file can be damaged is an InvalidArgument naming `source` and,
// where one is at fault, the tensor: shorter than 8 bytes, a header length
// past the end (truncated), a header that is not a JSON object, an entry
// without dtype/shape/data_offsets or with wrong types, an unsupported
// dtype, a negative dimension, offsets that disagree with dtype x shape,
// ranges that overlap, leave gaps, or run past the end (truncated data).
absl::StatusOr<SafetensorsContent> DecodeSafetensors(std::string_view bytes,
                                                     std::string_view source);

// EncodeSafetensors, then WriteFileAtomically (train/checkpoint/atomic_file.h):
// `path` holds the old file or the new one, never a torn one.
absl::Status SaveSafetensors(const std::string& path,
                             const nn::StateDict& tensors,
                             const Metadata& metadata = {});

// ReadFile + DecodeSafetensors.
absl::StatusOr<SafetensorsContent> LoadSafetensors(const std::string& path);

// OK when every floating-point value of `tensors` (f32, f64, f16, bf16; CPU
// tensors as LoadSafetensors gives them) is finite. Otherwise
// InvalidArgument naming `file`, the first tensor with a NaN or infinity,
// the element's index and value, and how many of its values are
// non-finite: weights loaded with a NaN would otherwise be blamed on the
// learning rate at the first step.
absl::Status CheckFiniteTensors(const nn::StateDict& tensors,
                                const std::string& file);

// Loads `path` into `module`'s parameters and buffers in place (PyTorch's
// model.load_state_dict(safetensors.torch.load_file(path)), strict). All or
// nothing: a damaged file (above), a missing or unexpected tensor, a wrong
// shape or dtype is an InvalidArgument naming the file and every offending
// tensor, and leaves the module as it was. NotFound when `path` does not
// exist.
absl::Status LoadModuleFromSafetensors(const std::string& path,
                                       nn::Module& module);

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_SAFETENSORS_H_

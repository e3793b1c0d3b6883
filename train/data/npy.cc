#include "train/data/npy.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/input_file.h"
#include "base/memory.h"
#include "base/status_macros.h"

namespace tandem::train {
namespace {

constexpr absl::string_view kMagic = "\x93NUMPY";

absl::Status Malformed(const std::string& name, int64_t offset,
                       absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": not a readable .npy file at byte ", offset, ": ", what));
}

// Finds `'key':` in the header dict and returns the text after it up to the
// next top-level comma or closing brace, trimmed.
bool DictValue(absl::string_view header, absl::string_view key,
               absl::string_view* value) {
  const std::string needle = absl::StrCat("'", key, "'");
  size_t pos = header.find(needle);
  if (pos == absl::string_view::npos) return false;
  pos = header.find(':', pos + needle.size());
  if (pos == absl::string_view::npos) return false;
  size_t end = pos + 1;
  int depth = 0;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  *value = absl::StripAsciiWhitespace(header.substr(pos + 1, end - pos - 1));
  return true;
}

// Whether the first bytes read as text (a CSV file): printable ASCII,
// whitespace, or a UTF-8 byte-order mark.
bool LooksLikeText(absl::string_view bytes) {
  absl::ConsumePrefix(&bytes, "\xEF\xBB\xBF");
  bytes = bytes.substr(0, 256);
  if (bytes.empty()) return false;
  for (char c : bytes) {
    if (!absl::ascii_isprint(c) && !absl::ascii_isspace(c)) return false;
  }
  return true;
}

}  // namespace

bool LooksLikeNpy(absl::string_view bytes) {
  return absl::StartsWith(bytes, kMagic);
}

absl::StatusOr<Tensor> ParseNpy(const std::string& bytes,
                                const std::string& name) {
  if (bytes.size() < 10 || !LooksLikeNpy(bytes)) {
    if (LooksLikeText(bytes)) {
      return Malformed(
          name, 0,
          "this looks like a text (CSV) file, not .npy; load it "
          "with LoadCsvDataset, or save the array with numpy.save");
    }
    if (absl::StartsWith(bytes, "\x1f\x8b")) {
      return Malformed(name, 0,
                       "this is a gzip file, not .npy; a gzipped CSV loads "
                       "with LoadCsvDataset, a .npy must be uncompressed");
    }
    return Malformed(name, 0, "missing the \\x93NUMPY magic string");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  int64_t header_len = 0;
  int64_t header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Malformed(name, 8, "truncated header length");
    uint32_t len = 0;
    for (int i = 0; i < 4; ++i) {
      len |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[8 + i]))
             << (8 * i);
    }
    header_len = len;
    header_start = 12;
  } else {
    return Malformed(name, 6,
                     absl::StrCat("unsupported format version ", major, ".",
                                  static_cast<int>(bytes[7]),
                                  " (expected 1.0, 2.0 or 3.0)"));
  }
  if (header_start + header_len > static_cast<int64_t>(bytes.size())) {
    return Malformed(name, header_start,
                     absl::StrCat("header of ", header_len,
                                  " bytes runs past the end of the file (",
                                  bytes.size(), " bytes)"));
  }
  const absl::string_view header =
      absl::string_view(bytes).substr(header_start, header_len);

  absl::string_view descr, fortran, shape_text;
  if (!DictValue(header, "descr", &descr) ||
      !DictValue(header, "fortran_order", &fortran) ||
      !DictValue(header, "shape", &shape_text)) {
    return Malformed(name, header_start,
                     absl::StrCat("header lacks 'descr', 'fortran_order' or "
                                  "'shape': ",
                                  absl::StripAsciiWhitespace(header)));
  }
  descr = absl::StripSuffix(absl::StripPrefix(descr, "'"), "'");
  DType dtype;
  if (descr == "<f4") {
    dtype = DType::kF32;
  } else if (descr == "<f8") {
    dtype = DType::kF64;
  } else if (descr == "<i8") {
    dtype = DType::kI64;
  } else if (descr == "<i4") {
    dtype = DType::kI32;
  } else {
    return Malformed(name, header_start,
                     absl::StrCat("element type '", descr,
                                  "' is not supported (expected '<f4', '<f8', "
                                  "'<i8' or '<i4': little-endian float32, "
                                  "float64, int64, int32)"));
  }
  if (fortran != "False") {
    return Malformed(name, header_start,
                     absl::StrCat("fortran_order is ", fortran,
                                  "; save the array in C order "
                                  "(numpy.ascontiguousarray)"));
  }
  if (!absl::ConsumePrefix(&shape_text, "(") ||
      !absl::ConsumeSuffix(&shape_text, ")")) {
    return Malformed(name, header_start,
                     absl::StrCat("shape is not a tuple: ", shape_text));
  }
  Shape shape;
  for (absl::string_view part : absl::StrSplit(shape_text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;  // "(3,)" has a trailing comma
    int64_t dim;
    if (!absl::SimpleAtoi(part, &dim) || dim < 0) {
      return Malformed(name, header_start,
                       absl::StrCat("shape entry '", part,
                                    "' is not a non-negative integer"));
    }
    shape.push_back(dim);
  }
  absl::StatusOr<int64_t> numel = NumelOf(shape);
  if (!numel.ok())
    return Malformed(name, header_start, numel.status().message());
  const int64_t data_start = header_start + header_len;
  const int64_t data_bytes = *numel * DTypeSize(dtype);
  const int64_t available = static_cast<int64_t>(bytes.size()) - data_start;
  if (available != data_bytes) {
    return Malformed(name, data_start,
                     absl::StrCat("shape ", ShapeToString(shape), " of ",
                                  DTypeName(dtype), " needs ", data_bytes,
                                  " bytes of data, the file has ", available));
  }
  return Tensor::FromBuffer(bytes.data() + data_start, *numel, dtype,
                            std::move(shape));
}

absl::StatusOr<Tensor> LoadNpy(const std::string& path) {
  // A regular file or a pipe, never a device; at most the machine's memory.
  const int64_t memory = PhysicalMemoryBytes();
  TANDEM_ASSIGN_OR_RETURN(
      std::string contents,
      ReadInputFile(path,
                    {.max_bytes = memory > 0 ? memory : int64_t{1} << 34}));
  return ParseNpy(contents, path);
}

absl::Status SaveNpy(const std::string& path, const Tensor& tensor) {
  std::string descr;
  switch (tensor.dtype()) {
    case DType::kF32:
      descr = "<f4";
      break;
    case DType::kF64:
      descr = "<f8";
      break;
    case DType::kI64:
      descr = "<i8";
      break;
    case DType::kI32:
      descr = "<i4";
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("SaveNpy(", path, "): dtype ", DTypeName(tensor.dtype()),
                       " has no .npy equivalent here; convert to f32 first"));
  }
  if (!tensor.defined() || !tensor.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SaveNpy(", path, "): needs a defined CPU tensor"));
  }
  // numpy writes "(3,)" for 1-d and "()" for 0-d.
  std::string shape = absl::StrCat("(", absl::StrJoin(tensor.shape(), ", "),
                                   tensor.ndim() == 1 ? ",)" : ")");
  std::string header =
      absl::StrCat("{'descr': '", descr,
                   "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces so that magic + version + length + header + '\n' is a
  // multiple of 64 bytes, as numpy does.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    return absl::PermissionDeniedError(absl::StrCat(
        "SaveNpy: cannot create ", path, " (", std::strerror(errno), ")"));
  }
  out.write(kMagic.data(), kMagic.size());
  const char version[2] = {1, 0};
  out.write(version, 2);
  const char len[2] = {static_cast<char>(header.size() & 0xff),
                       static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out << header;
  out.write(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  if (!out) {
    return absl::DataLossError(
        absl::StrCat("SaveNpy: writing ", path, " failed"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::train

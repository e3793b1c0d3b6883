#include "train/checkpoint/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/half.h"
#include "base/status_macros.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/json.h"

namespace tandem::train::checkpoint {
namespace {

constexpr std::string_view kMetadataKey = "__metadata__";
// The reference implementation refuses headers above 100 MB; so does tandem
// (a larger length is a damaged file, not a header).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

constexpr DType kAllDTypes[] = {DType::kF32,  DType::kF64, DType::kF16,
                                DType::kBF16, DType::kI64, DType::kI32};

absl::Status Bad(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "safetensors file ", std::string(source), ": ", std::string(what),
      "; the file is damaged or not a safetensors file: write it "
      "again (tandem's SaveSafetensors or "
      "safetensors.torch.save_file)"));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin;
  uint64_t end;
};

absl::StatusOr<Entry> ParseEntry(const std::string& name, const JsonValue& v,
                                 std::string_view source) {
  const std::string who = absl::StrCat("tensor ", JsonQuote(name));
  if (v.kind != JsonValue::Kind::kObject) {
    return Bad(source, absl::StrCat(who, " is not a JSON object"));
  }
  Entry e;
  e.name = name;
  auto dtype_it = v.object.find("dtype");
  if (dtype_it == v.object.end() ||
      dtype_it->second.kind != JsonValue::Kind::kString) {
    return Bad(source, absl::StrCat(who, " has no string \"dtype\""));
  }
  const std::optional<DType> dtype =
      SafetensorsDTypeFromName(dtype_it->second.string);
  if (dtype.has_value()) e.dtype = *dtype;
  if (!dtype.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "safetensors file ", std::string(source), ": ", who, " has dtype ",
        JsonQuote(dtype_it->second.string),
        ", which tandem does not support (expected F32, F64, F16, BF16, I64 "
        "or I32); convert the tensor before saving it"));
  }
  auto shape_it = v.object.find("shape");
  if (shape_it == v.object.end() ||
      shape_it->second.kind != JsonValue::Kind::kArray) {
    return Bad(source, absl::StrCat(who, " has no \"shape\" array"));
  }
  // Byte count, checked for overflow as the dims multiply.
  uint64_t bytes = DTypeSize(e.dtype);
  for (const JsonValue& d : shape_it->second.array) {
    if (d.kind != JsonValue::Kind::kInteger || d.integer < 0) {
      return Bad(source, absl::StrCat(who,
                                      " has a shape entry that is not an "
                                      "integer >= 0"));
    }
    const uint64_t dim = static_cast<uint64_t>(d.integer);
    if (dim != 0 && bytes > std::numeric_limits<uint64_t>::max() / dim) {
      return Bad(source, absl::StrCat(who, " has a shape too large"));
    }
    bytes *= dim;
    e.shape.push_back(d.integer);
  }
  auto off_it = v.object.find("data_offsets");
  if (off_it == v.object.end() ||
      off_it->second.kind != JsonValue::Kind::kArray ||
      off_it->second.array.size() != 2 ||
      off_it->second.array[0].kind != JsonValue::Kind::kInteger ||
      off_it->second.array[1].kind != JsonValue::Kind::kInteger ||
      off_it->second.array[0].integer < 0 ||
      off_it->second.array[1].integer < off_it->second.array[0].integer) {
    return Bad(source, absl::StrCat(who,
                                    " has no \"data_offsets\" [begin, end] "
                                    "with 0 <= begin <= end"));
  }
  e.begin = static_cast<uint64_t>(off_it->second.array[0].integer);
  e.end = static_cast<uint64_t>(off_it->second.array[1].integer);
  if (e.end - e.begin != bytes) {
    return Bad(source, absl::StrCat(who, " (", dtype_it->second.string, " ",
                                    ShapeString(e.shape), ") needs ", bytes,
                                    " bytes but its data_offsets [", e.begin,
                                    ", ", e.end, "] span ", e.end - e.begin));
  }
  return e;
}

}  // namespace

std::optional<DType> SafetensorsDTypeFromName(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (name == SafetensorsDTypeName(d)) return d;
  }
  return std::nullopt;
}

std::string_view SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI64:
      return "I64";
    case DType::kI32:
      return "I32";
    case DType::kU8:  // comm's byte dtype; tensors are not created with it
      break;
  }
  return "?";
}

absl::StatusOr<std::string> EncodeSafetensors(const nn::StateDict& tensors,
                                              const Metadata& metadata) {
  std::set<std::string_view> seen;
  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += absl::StrCat(JsonQuote(kMetadataKey), ":{");
    bool first_meta = true;
    for (const auto& [key, value] : metadata) {
      if (!first_meta) header += ",";
      first_meta = false;
      header += absl::StrCat(JsonQuote(key), ":", JsonQuote(value));
    }
    header += "}";
    first = false;
  }
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  uint64_t offset = 0;
  for (const nn::NamedTensor& nt : tensors) {
    if (nt.name.empty() || nt.name == kMetadataKey ||
        !seen.insert(nt.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "EncodeSafetensors: tensor name ", JsonQuote(nt.name),
          " is empty, reserved (__metadata__) or given twice; every tensor "
          "needs its own name"));
    }
    if (!nt.tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("EncodeSafetensors: tensor ", JsonQuote(nt.name),
                       " is undefined; only defined tensors can be saved"));
    }
    Tensor t = nt.tensor;
    if (!t.device().is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(t, t.To(Device::CPU()));
    }
    const uint64_t bytes = static_cast<uint64_t>(t.nbytes());
    header +=
        absl::StrCat(first ? "" : ",", JsonQuote(nt.name), ":{\"dtype\":\"",
                     std::string(SafetensorsDTypeName(t.dtype())),
                     "\",\"shape\":[", absl::StrJoin(t.shape(), ","),
                     "],\"data_offsets\":[", offset, ",", offset + bytes, "]}");
    first = false;
    offset += bytes;
    host.push_back(std::move(t));
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + header.size() + offset);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  out += header;
  for (const Tensor& t : host) {
    if (t.nbytes() > 0) {
      out.append(static_cast<const char*>(t.raw_data()),
                 static_cast<size_t>(t.nbytes()));
    }
  }
  return out;
}

absl::StatusOr<SafetensorsContent> DecodeSafetensors(std::string_view bytes,
                                                     std::string_view source) {
  if (bytes.size() < 8) {
    return Bad(source, absl::StrCat("it holds ", bytes.size(),
                                    " bytes, fewer than the 8-byte header "
                                    "length (truncated)"));
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) {
    n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    return Bad(source, absl::StrCat("the header length is ", n, " bytes but ",
                                    bytes.size() - 8,
                                    " follow the length field (truncated, or "
                                    "not a safetensors file)"));
  }
  const std::string_view header_text = bytes.substr(8, n);
  if (header_text.empty() || header_text[0] != '{') {
    return Bad(source, "the header does not start with '{'");
  }
  absl::StatusOr<JsonValue> header = ParseJson(header_text);
  if (!header.ok()) {
    return Bad(source, absl::StrCat("the header is not valid JSON (",
                                    header.status().message(), ")"));
  }
  const std::string_view data = bytes.substr(8 + n);
  SafetensorsContent content;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header->object) {
    if (name == kMetadataKey) {
      if (value.kind != JsonValue::Kind::kObject) {
        return Bad(source, "__metadata__ is not a JSON object");
      }
      for (const auto& [key, v] : value.object) {
        if (v.kind != JsonValue::Kind::kString) {
          return Bad(source, absl::StrCat("__metadata__ entry ", JsonQuote(key),
                                          " is not a string"));
        }
        content.metadata[key] = v.string;
      }
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(Entry e, ParseEntry(name, value, source));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    if (e.begin != expected) {
      return Bad(source, absl::StrCat(
                             "tensor ", JsonQuote(e.name), "'s data starts at ",
                             e.begin, " but the previous tensor ends at ",
                             expected, " (overlapping or gapped ranges)"));
    }
    if (e.end > data.size()) {
      return Bad(source, absl::StrCat("tensor ", JsonQuote(e.name),
                                      "'s data ends at byte ", e.end,
                                      " of the data section, which holds ",
                                      data.size(), " (truncated)"));
    }
    expected = e.end;
  }
  if (expected != data.size()) {
    return Bad(source, absl::StrCat("the tensors cover ", expected,
                                    " bytes of the data section but it holds ",
                                    data.size()));
  }
  for (const Entry& e : entries) {
    int64_t count = 1;
    for (int64_t d : e.shape) count *= d;
    TANDEM_ASSIGN_OR_RETURN(
        Tensor t, Tensor::FromBuffer(data.data() + e.begin, count, e.dtype,
                                     Shape(e.shape.begin(), e.shape.end())));
    content.tensors.push_back({e.name, std::move(t)});
  }
  return content;
}

absl::Status SaveSafetensors(const std::string& path,
                             const nn::StateDict& tensors,
                             const Metadata& metadata) {
  TANDEM_ASSIGN_OR_RETURN(std::string bytes,
                          EncodeSafetensors(tensors, metadata));
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<SafetensorsContent> LoadSafetensors(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return DecodeSafetensors(bytes, path);
}

absl::Status LoadModuleFromSafetensors(const std::string& path,
                                       nn::Module& module) {
  TANDEM_ASSIGN_OR_RETURN(SafetensorsContent content, LoadSafetensors(path));
  absl::Status s = module.LoadStateDict(content.tensors, /*strict=*/true);
  if (!s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("safetensors file ", path,
                               " does not fit the model (nothing was loaded): ",
                               s.message()));
  }
  return absl::OkStatus();
}

namespace {

// The value of element `i` of `t` as a double, for the dtypes
// CheckFiniteTensors reads.
double ValueAt(const Tensor& t, int64_t i) {
  const void* p = t.raw_data();
  switch (t.dtype()) {
    case DType::kF32:
      return static_cast<const float*>(p)[i];
    case DType::kF64:
      return static_cast<const double*>(p)[i];
    case DType::kF16:
      return half::F32FromF16(static_cast<const uint16_t*>(p)[i]);
    case DType::kBF16:
      return half::F32FromBF16(static_cast<const uint16_t*>(p)[i]);
    default:
      return 0;
  }
}

}  // namespace

absl::Status CheckFiniteTensors(const nn::StateDict& tensors,
                                const std::string& file) {
  for (const nn::NamedTensor& nt : tensors) {
    const Tensor& t = nt.tensor;
    const DType d = t.dtype();
    if (d != DType::kF32 && d != DType::kF64 && d != DType::kF16 &&
        d != DType::kBF16) {
      continue;
    }
    const int64_t n = t.numel();
    int64_t first = -1;
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(ValueAt(t, i))) {
        if (first < 0) first = i;
        ++count;
      }
    }
    if (first >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": tensor \"", nt.name, "\" holds ", count,
          " non-finite value(s) (first at element ", first, ": ",
          ValueAt(t, first),
          "); a model or training state with NaN or infinite values cannot "
          "train: load another file"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::train::checkpoint

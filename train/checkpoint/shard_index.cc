#include "train/checkpoint/shard_index.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "train/checkpoint/json.h"
#include "train/checkpoint/safetensors.h"

namespace tandem::train::checkpoint {
namespace {

absl::Status Bad(std::string_view source, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint index ", std::string(source), ": ", what));
}

bool PlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string SliceText(const std::string& tensor, const IndexSlice& s) {
  return absl::StrCat("tensor ", JsonQuote(tensor), " slice [", s.begin, ", ",
                      s.end, ") in ", JsonQuote(s.file), " at byte ", s.offset);
}

// The field `key` of `object`, of `kind`; InvalidArgument naming `who`.
absl::StatusOr<const JsonValue*> Field(const JsonValue& object,
                                       const std::string& key,
                                       JsonValue::Kind kind,
                                       std::string_view source,
                                       const std::string& who) {
  auto it = object.object.find(key);
  if (it == object.object.end() || it->second.kind != kind) {
    return Bad(source,
               absl::StrCat(who, " has no ", JsonQuote(key), " of ",
                            kind == JsonValue::Kind::kInteger  ? "integer"
                            : kind == JsonValue::Kind::kString ? "string"
                            : kind == JsonValue::Kind::kArray  ? "array"
                                                               : "object",
                            " type"));
  }
  return &it->second;
}

absl::StatusOr<DType> DTypeNamed(const std::string& name,
                                 std::string_view source,
                                 const std::string& who) {
  const std::optional<DType> dtype = SafetensorsDTypeFromName(name);
  if (dtype.has_value()) return *dtype;
  return Bad(source,
             absl::StrCat(who, " has dtype ", JsonQuote(name),
                          "; expected F32, F64, F16, BF16, I64 or I32"));
}

absl::StatusOr<IndexTensor> ParseTensor(const JsonValue& v,
                                        std::string_view source,
                                        const std::string& name) {
  const std::string who = absl::StrCat("tensor ", JsonQuote(name));
  if (v.kind != JsonValue::Kind::kObject) {
    return Bad(source, absl::StrCat(who, " is not an object"));
  }
  IndexTensor t;
  TANDEM_ASSIGN_OR_RETURN(
      const JsonValue* dtype,
      Field(v, "dtype", JsonValue::Kind::kString, source, who));
  TANDEM_ASSIGN_OR_RETURN(t.dtype, DTypeNamed(dtype->string, source, who));
  TANDEM_ASSIGN_OR_RETURN(
      const JsonValue* shape,
      Field(v, "shape", JsonValue::Kind::kArray, source, who));
  for (const JsonValue& d : shape->array) {
    if (d.kind != JsonValue::Kind::kInteger) {
      return Bad(source, absl::StrCat(who, "'s shape holds a non-integer"));
    }
    t.shape.push_back(d.integer);
  }
  TANDEM_ASSIGN_OR_RETURN(
      const JsonValue* slices,
      Field(v, "slices", JsonValue::Kind::kArray, source, who));
  for (const JsonValue& s : slices->array) {
    const bool ok = s.kind == JsonValue::Kind::kArray && s.array.size() == 4 &&
                    s.array[0].kind == JsonValue::Kind::kInteger &&
                    s.array[1].kind == JsonValue::Kind::kInteger &&
                    s.array[2].kind == JsonValue::Kind::kString &&
                    s.array[3].kind == JsonValue::Kind::kInteger;
    if (!ok) {
      return Bad(source, absl::StrCat(who,
                                      " has a slice that is not [begin, end, "
                                      "\"file\", byte offset]"));
    }
    t.slices.push_back({s.array[0].integer, s.array[1].integer,
                        s.array[2].string, s.array[3].integer});
  }
  return t;
}

}  // namespace

int64_t IndexTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status ValidateShardIndex(const ShardIndex& index,
                                std::string_view source) {
  for (const auto& [file, bytes] : index.files) {
    if (!PlainFileName(file)) {
      return Bad(source, absl::StrCat("shard file name ", JsonQuote(file),
                                      " is not a plain name in the folder"));
    }
    if (bytes < 0) {
      return Bad(source, absl::StrCat("shard file ", JsonQuote(file), " has ",
                                      bytes, " bytes"));
    }
  }
  for (const auto& [name, t] : index.tensors) {
    for (int64_t d : t.shape) {
      if (d < 0) {
        return Bad(source, absl::StrCat("tensor ", JsonQuote(name),
                                        " has a negative dimension"));
      }
    }
    const int64_t numel = t.numel();
    const int64_t size = DTypeSize(t.dtype);
    int64_t next = 0;
    for (const IndexSlice& s : t.slices) {
      if (s.begin != next || s.end <= s.begin || s.end > numel) {
        return Bad(source, absl::StrCat(
                               SliceText(name, s),
                               " does not follow on from "
                               "element ",
                               next, " within the tensor's ", numel,
                               " elements (the slices must tile it in order)"));
      }
      auto file = index.files.find(s.file);
      if (file == index.files.end()) {
        return Bad(source,
                   absl::StrCat(SliceText(name, s),
                                " names a file the index does not list"));
      }
      if (s.offset < 0 || s.offset + (s.end - s.begin) * size > file->second) {
        return Bad(source, absl::StrCat(SliceText(name, s), " ends past the ",
                                        file->second, " bytes of that file"));
      }
      next = s.end;
    }
    if (next != numel) {
      return Bad(source, absl::StrCat("tensor ", JsonQuote(name),
                                      "'s slices "
                                      "hold elements [0, ",
                                      next, ") of ", numel));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EncodeShardIndex(const ShardIndex& index) {
  TANDEM_RETURN_IF_ERROR(ValidateShardIndex(index, "(being written)"));
  std::string out =
      absl::StrCat("{\"format\": ", JsonQuote(kShardIndexFormat),
                   ", \"version\": ", kShardIndexVersion, ",\n\"metadata\": {");
  const char* sep = "\n  ";
  for (const auto& [key, value] : index.metadata) {
    absl::StrAppend(&out, sep, JsonQuote(key), ": ", JsonQuote(value));
    sep = ",\n  ";
  }
  absl::StrAppend(&out, "},\n\"files\": {");
  sep = "\n  ";
  for (const auto& [file, bytes] : index.files) {
    absl::StrAppend(&out, sep, JsonQuote(file), ": ", bytes);
    sep = ",\n  ";
  }
  absl::StrAppend(&out, "},\n\"tensors\": {");
  sep = "\n  ";
  for (const auto& [name, t] : index.tensors) {
    std::vector<std::string> slices;
    for (const IndexSlice& s : t.slices) {
      slices.push_back(absl::StrCat("[", s.begin, ", ", s.end, ", ",
                                    JsonQuote(s.file), ", ", s.offset, "]"));
    }
    absl::StrAppend(&out, sep, JsonQuote(name), ": {\"dtype\": \"",
                    std::string(SafetensorsDTypeName(t.dtype)),
                    "\", \"shape\": [", absl::StrJoin(t.shape, ", "),
                    "], \"slices\": [", absl::StrJoin(slices, ", "), "]}");
    sep = ",\n  ";
  }
  absl::StrAppend(&out, "}}\n");
  return out;
}

absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view json,
                                           std::string_view source) {
  absl::StatusOr<JsonValue> parsed = ParseJson(json);
  if (!parsed.ok()) {
    return Bad(source, std::string(parsed.status().message()));
  }
  const JsonValue& root = *parsed;
  if (root.kind != JsonValue::Kind::kObject) {
    return Bad(source, "not a JSON object");
  }
  TANDEM_ASSIGN_OR_RETURN(
      const JsonValue* format,
      Field(root, "format", JsonValue::Kind::kString, source, "the index"));
  if (format->string != kShardIndexFormat) {
    return Bad(source,
               absl::StrCat("format is ", JsonQuote(format->string),
                            "; expected ", JsonQuote(kShardIndexFormat)));
  }
  TANDEM_ASSIGN_OR_RETURN(
      const JsonValue* version,
      Field(root, "version", JsonValue::Kind::kInteger, source, "the index"));
  if (version->integer != kShardIndexVersion) {
    return Bad(source, absl::StrCat("version ", version->integer,
                                    "; this tandem reads version ",
                                    kShardIndexVersion));
  }
  ShardIndex index;
  TANDEM_ASSIGN_OR_RETURN(
      const JsonValue* metadata,
      Field(root, "metadata", JsonValue::Kind::kObject, source, "the index"));
  for (const auto& [key, value] : metadata->object) {
    if (value.kind != JsonValue::Kind::kString) {
      return Bad(source,
                 absl::StrCat("metadata ", JsonQuote(key), " is not a string"));
    }
    index.metadata[key] = value.string;
  }
  TANDEM_ASSIGN_OR_RETURN(
      const JsonValue* files,
      Field(root, "files", JsonValue::Kind::kObject, source, "the index"));
  for (const auto& [file, bytes] : files->object) {
    if (bytes.kind != JsonValue::Kind::kInteger) {
      return Bad(source, absl::StrCat("file ", JsonQuote(file),
                                      "'s size is not an integer"));
    }
    index.files[file] = bytes.integer;
  }
  TANDEM_ASSIGN_OR_RETURN(
      const JsonValue* tensors,
      Field(root, "tensors", JsonValue::Kind::kObject, source, "the index"));
  for (const auto& [name, value] : tensors->object) {
    TANDEM_ASSIGN_OR_RETURN(index.tensors[name],
                            ParseTensor(value, source, name));
  }
  TANDEM_RETURN_IF_ERROR(ValidateShardIndex(index, source));
  return index;
}

}  // namespace tandem::train::checkpoint

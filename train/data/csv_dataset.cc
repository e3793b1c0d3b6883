#include "train/data/csv_dataset.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "base/input_file.h"
#include "base/memory.h"
#include "base/status_macros.h"
#include "train/data/npy.h"

namespace tandem::train {
namespace {

// Reads the whole (possibly gzip-compressed) file: a regular file or a
// pipe (read once), never a device or a directory (base/input_file.h), and
// no more text than half the machine's memory.
absl::StatusOr<std::string> ReadAll(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(const int fd, OpenInputFile(path));
  gzFile file = gzdopen(fd, "rb");
  if (file == nullptr) {
    close(fd);
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  absl::Cleanup close = [file] { gzclose(file); };
  const int64_t memory = PhysicalMemoryBytes();
  const int64_t max_bytes = memory > 0 ? memory / 2 : int64_t{1} << 34;
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    if (static_cast<int64_t>(contents.size()) > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path, ": more than ", max_bytes,
          " bytes of text (half this machine's memory); stopped reading"));
    }
    int n = gzread(file, buffer, sizeof(buffer));
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      return absl::DataLossError(
          absl::StrCat(path, ": cannot read after byte ", contents.size(), " (",
                       message, "); is the file truncated or not gzip?"));
    }
    if (n == 0) break;
    contents.append(buffer, n);
  }
  // zlib hands back what it could decompress of a cut-off stream and flags
  // it only here: a truncated .gz must not load as a shorter data set.
  int code = Z_OK;
  gzerror(file, &code);
  if (code == Z_BUF_ERROR) {
    return absl::DataLossError(absl::StrCat(
        path, ": the gzip stream ends early (after ", contents.size(),
        " decompressed bytes); the file is truncated: copy it again"));
  }
  return contents;
}

// A separator other than `delimiter` that `line` contains, or 0. Named in
// the error for a file written with another separator (a European ';' CSV, a
// TSV), which otherwise reads as one unparsable column.
char OtherSeparator(absl::string_view line, char delimiter) {
  for (char c : {';', '\t', ',', '|'}) {
    if (c != delimiter && line.find(c) != absl::string_view::npos) return c;
  }
  return 0;
}

std::string SeparatorName(char c) {
  return c == '\t' ? std::string("a tab")
                   : absl::StrCat("'", std::string(1, c), "'");
}

absl::Status WrongSeparator(const std::string& path, int64_t line_number,
                            char found, char delimiter) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, ":", line_number, ": the values are separated by ",
      SeparatorName(found), ", but the delimiter is ", SeparatorName(delimiter),
      "; convert the file to ", SeparatorName(delimiter),
      "-separated values (or set CsvOptions::delimiter)"));
}

// The label in `field` (already trimmed) as an int64 class index, checked
// against [0, num_classes). Quoted as written in every error, so a value too
// large for int64 is reported as the file has it.
absl::StatusOr<int64_t> ParseLabel(absl::string_view field,
                                   const std::string& where,
                                   int64_t num_classes) {
  const std::string range = num_classes > 0
                                ? absl::StrCat("[0, ", num_classes, ")")
                                : std::string("[0, 2^63)");
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " (the label): '", field, "' ", why,
                     "; labels must be class indices in ", range,
                     ": fix the file or the number of classes"));
  };
  int64_t label = 0;
  const char* end = field.data() + field.size();
  auto [stop, error] = std::from_chars(field.data(), end, label);
  if (field.empty() || stop != end) {
    // "3.0" is a class index too (pandas writes integral floats so).
    double value = 0;
    auto [dstop, derror] = std::from_chars(field.data(), end, value);
    if (field.empty() || derror != std::errc() || dstop != end ||
        !std::isfinite(value) || value != std::floor(value)) {
      return bad("is not a class index (a non-negative integer)");
    }
    if (std::fabs(value) >= 9.2e18) return bad("is out of range");
    label = static_cast<int64_t>(value);
  } else if (error == std::errc::result_out_of_range) {
    return bad("is out of range (too large for an int64 class index)");
  }
  if (label < 0 || (num_classes > 0 && label >= num_classes)) {
    return bad("is out of range");
  }
  return label;
}

// The feature in `field` (already trimmed), checked after its conversion to
// `dtype`: 1e40 is finite as a double but overflows f32 to inf.
absl::StatusOr<double> ParseFeature(absl::string_view field,
                                    const std::string& where, DType dtype) {
  double value = 0;
  const char* end = field.data() + field.size();
  auto [stop, error] = std::from_chars(field.data(), end, value);
  if (field.empty() || error != std::errc() || stop != end ||
      !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", field, "' is not a finite number"));
  }
  if (dtype == DType::kF32 && !std::isfinite(static_cast<float>(value))) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": '", field,
        "' overflows f32 (the largest finite f32 is about 3.4e38); rescale "
        "the data or load it as f64 (CsvOptions::feature_dtype)"));
  }
  return value;
}

}  // namespace

absl::StatusOr<TensorDataset> LoadCsvDataset(const std::string& path,
                                             const CsvOptions& options) {
  if (options.feature_dtype != DType::kF32 &&
      options.feature_dtype != DType::kF64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadCsvDataset(", path, "): feature_dtype must be f32 or f64, got ",
        DTypeName(options.feature_dtype)));
  }
  if (options.num_classes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadCsvDataset(", path, "): num_classes must be >= 0 ",
                     "(0: any label), got ", options.num_classes));
  }
  TANDEM_ASSIGN_OR_RETURN(std::string contents, ReadAll(path));

  absl::string_view text = contents;
  if (LooksLikeNpy(text)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": this looks like a .npy file (it starts with NumPy's magic bytes "
        "\\x93NUMPY), not CSV; load it with LoadNpy, or pass a CSV file"));
  }
  absl::ConsumePrefix(&text, "\xEF\xBB\xBF");  // a UTF-8 byte-order mark

  std::vector<double> features;
  std::vector<int64_t> labels;
  int64_t columns = -1;
  int64_t label_column = -1;
  int64_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line_number == 1 && options.skip_header) continue;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, options.delimiter);
    const int64_t n = static_cast<int64_t>(fields.size());
    if (columns < 0) {
      if (n == 1) {
        if (char other = OtherSeparator(line, options.delimiter)) {
          return WrongSeparator(path, line_number, other, options.delimiter);
        }
      }
      columns = n;
      label_column = options.label_column < 0 ? n + options.label_column
                                              : options.label_column;
      if (n < 2 || label_column < 0 || label_column >= n) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number, ": the first row has ", n,
                         " column(s); need at least 2 with the label column ",
                         options.label_column, " among them"));
      }
    } else if (n != columns) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", n,
                       " columns, but earlier rows have ", columns));
    }
    for (int64_t c = 0; c < n; ++c) {
      absl::string_view field = absl::StripAsciiWhitespace(fields[c]);
      const std::string where =
          absl::StrCat(path, ":", line_number, ": column ", c + 1);
      if (c == label_column) {
        TANDEM_ASSIGN_OR_RETURN(int64_t label,
                                ParseLabel(field, where, options.num_classes));
        labels.push_back(label);
      } else {
        absl::StatusOr<double> value =
            ParseFeature(field, where, options.feature_dtype);
        if (!value.ok()) {
          if (char other = OtherSeparator(field, options.delimiter)) {
            return WrongSeparator(path, line_number, other, options.delimiter);
          }
          return value.status();
        }
        features.push_back(*value);
      }
    }
  }
  if (columns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no data rows"));
  }
  const int64_t rows = static_cast<int64_t>(labels.size());
  Shape shape = {rows, columns - 1};
  Tensor feature_tensor;
  if (options.feature_dtype == DType::kF64) {
    TANDEM_ASSIGN_OR_RETURN(feature_tensor,
                            Tensor::FromVector<double>(features, shape));
  } else {
    std::vector<float> narrow(features.begin(), features.end());
    TANDEM_ASSIGN_OR_RETURN(feature_tensor,
                            Tensor::FromVector<float>(narrow, shape));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor label_tensor,
                          Tensor::FromVector<int64_t>(labels));
  return TensorDataset::Create(std::move(feature_tensor),
                               std::move(label_tensor));
}

}  // namespace tandem::train

#include "train/data/csv_dataset.h"

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
#include "base/status_macros.h"

namespace tandem::train {
namespace {

// Reads the whole (possibly gzip-compressed) file.
absl::StatusOr<std::string> ReadAll(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  absl::Cleanup close = [file] { gzclose(file); };
  std::string contents;
  char buffer[1 << 16];
  while (true) {
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
  return contents;
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
  TANDEM_ASSIGN_OR_RETURN(std::string contents, ReadAll(path));

  std::vector<double> features;
  std::vector<int64_t> labels;
  int64_t columns = -1;
  int64_t label_column = -1;
  int64_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_number;
    if (line_number == 1 && options.skip_header) continue;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, options.delimiter);
    const int64_t n = static_cast<int64_t>(fields.size());
    if (columns < 0) {
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
      double value = 0;
      auto [end, error] =
          std::from_chars(field.data(), field.data() + field.size(), value);
      if (field.empty() || error != std::errc() ||
          end != field.data() + field.size() || !std::isfinite(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number, ": column ", c + 1, ": '",
                         field, "' is not a finite number"));
      }
      if (c == label_column) {
        if (value < 0 || value != std::floor(value) || value > 9.0e15) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ":", line_number, ": column ", c + 1, " (the label): '",
              field, "' is not a class index (a non-negative integer)"));
        }
        labels.push_back(static_cast<int64_t>(value));
      } else {
        features.push_back(value);
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

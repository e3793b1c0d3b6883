// Loading a numeric CSV file (optionally gzip-compressed) as a TensorDataset.
//
//   TANDEM_ASSIGN_OR_RETURN(TensorDataset digits,
//                           LoadCsvDataset("train/data/digits.csv.gz"));
//   // features [1797, 64] f32, labels [1797] i64 (the last column)
//
// Every row has the same number of numeric columns; one of them (the last,
// unless label_column says otherwise) holds the class index, a non-negative
// integer. Blank lines are skipped. Files ending in .gz are decompressed on
// the fly (zlib reads uncompressed files too). A malformed file is an error
// naming the file, the line, the column and what was found; nothing partly
// loaded is returned.
#ifndef TANDEM_TRAIN_DATA_CSV_DATASET_H_
#define TANDEM_TRAIN_DATA_CSV_DATASET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tensor/dtype.h"
#include "train/data/dataset.h"

namespace tandem::train {

struct CsvOptions {
  // Which column is the label; negative counts from the end (-1 = last).
  int64_t label_column = -1;
  // Skip the first line (a header row of column names).
  bool skip_header = false;
  char delimiter = ',';
  // kF32 or kF64.
  DType feature_dtype = DType::kF32;
};

absl::StatusOr<TensorDataset> LoadCsvDataset(const std::string& path,
                                             const CsvOptions& options = {});

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_CSV_DATASET_H_

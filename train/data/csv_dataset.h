// Loading a numeric CSV file (optionally gzip-compressed) as a TensorDataset.
//
//   TANDEM_ASSIGN_OR_RETURN(TensorDataset digits,
//                           LoadCsvDataset("train/data/digits.csv.gz"));
//   // features [1797, 64] f32, labels [1797] i64 (the last column)
//
// Every row has the same number of numeric columns; one of them (the last,
// unless label_column says otherwise) holds the class index, a non-negative
// integer. Blank lines are skipped; a leading UTF-8 byte-order mark is
// ignored (as Python's csv with utf-8-sig and pandas do). Files ending in .gz
// are decompressed on the fly (zlib reads uncompressed files too).
//
// Every value is checked after its conversion to the tensor's dtype: a
// feature that is not finite as f32 (1e40 overflows) or f64 is an error, and
// so is a label outside [0, num_classes) when num_classes is set (the label
// is quoted as written in the file, however large). A malformed file is an
// error naming the file, the line, the column and what was found, and says
// what to do: a .npy file passed as CSV, a ';' or tab separator where ','
// was expected, a ragged row. Nothing partly loaded is returned.
#ifndef TANDEM_TRAIN_DATA_CSV_DATASET_H_
#define TANDEM_TRAIN_DATA_CSV_DATASET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "base/dtype.h"
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
  // > 0: every label must lie in [0, num_classes); 0: any label >= 0.
  int64_t num_classes = 0;
};

absl::StatusOr<TensorDataset> LoadCsvDataset(const std::string& path,
                                             const CsvOptions& options = {});

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_CSV_DATASET_H_

// The small JSON subset a safetensors header uses, parsed and written.
//
//   TANDEM_ASSIGN_OR_RETURN(JsonValue v, ParseJson(R"({"a": [1, 2]})"));
//   v.object.at("a").array[1].integer;  // 2
//
// Supported: objects, arrays, strings (every escape, \u with surrogate pairs,
// stored as UTF-8), integers that fit int64_t (kInteger), numbers with a
// fraction or an exponent (kNumber, the nearest double: a Hugging Face
// config.json's 1e-05 and 0.1), true/false/null. An integer beyond int64_t
// is an error naming the offset, not a rounded double. Duplicate keys in an
// object are an error (a header naming one tensor twice is corrupt). Nesting is
// limited to 64 levels. Pure functions; thread-safe.
#ifndef TANDEM_TRAIN_CHECKPOINT_JSON_H_
#define TANDEM_TRAIN_CHECKPOINT_JSON_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/json_quote.h"

namespace tandem::train::checkpoint {

struct JsonValue {
  enum class Kind { kNull, kBool, kInteger, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  int64_t integer = 0;  // kInteger
  double number = 0;    // kNumber only (an integer stays in `integer`)
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;  // keys sorted
};

// Parses `text`, which must hold exactly one value (whitespace around it is
// allowed). InvalidArgument says what was expected and at which byte.
absl::StatusOr<JsonValue> ParseJson(std::string_view text);

// `s` as a JSON string literal (the one escaper, base/json_quote.h).
using ::tandem::base::JsonQuote;

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_JSON_H_

// JsonQuote: a string as a JSON string literal, the one escaper of the
// repository's JSON writers (the timeline trace, safetensors headers).
//
//   base::JsonQuote("a\"b\n")   // "\"a\\\"b\\n\""
//
// Escapes '"', '\\', '\n', '\r', '\t' by name and every other control
// character as \u00XX; bytes >= 0x20 (UTF-8 included) pass unchanged.
#ifndef TANDEM_BASE_JSON_QUOTE_H_
#define TANDEM_BASE_JSON_QUOTE_H_

#include <string>
#include <string_view>

namespace tandem::base {

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view s);

}  // namespace tandem::base

#endif  // TANDEM_BASE_JSON_QUOTE_H_

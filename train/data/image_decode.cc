#include "train/data/image_decode.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/input_file.h"

namespace tandem::train {
namespace {

// What a file that is neither PNG nor JPEG seems to be, for the error.
std::string Describe(absl::string_view bytes) {
  if (bytes.empty()) return "an empty file (0 bytes)";
  if (absl::StartsWith(bytes, "GIF8")) return "a GIF image";
  if (absl::StartsWith(bytes, "BM")) return "a BMP image";
  if (absl::StartsWith(bytes, absl::string_view("II*\0", 4)) ||
      absl::StartsWith(bytes, absl::string_view("MM\0*", 4))) {
    return "a TIFF image";
  }
  if (absl::StartsWith(bytes, "RIFF") && bytes.size() >= 12 &&
      bytes.substr(8, 4) == "WEBP") {
    return "a WebP image";
  }
  if (bytes.size() >= 2 && bytes[0] == 'P' && bytes[1] >= '1' &&
      bytes[1] <= '7') {
    return "a PPM/PGM/PBM image";
  }
  std::string hex;
  for (size_t i = 0; i < bytes.size() && i < 8; ++i) {
    absl::StrAppendFormat(&hex, "%s%02x", i == 0 ? "" : " ",
                          static_cast<unsigned char>(bytes[i]));
  }
  return absl::StrCat("not an image (its first bytes are ", hex, ")");
}

}  // namespace

namespace internal {

absl::Status DecodeError(absl::string_view name, absl::string_view format,
                         absl::string_view reason, bool truncated,
                         bool unsupported) {
  const std::string message =
      absl::StrCat(name, ": cannot decode this ", format, ": ", reason);
  if (unsupported) return absl::InvalidArgumentError(message);
  return absl::DataLossError(absl::StrCat(
      message, truncated ? "; the file is truncated: copy it again"
                         : "; the file is corrupt: replace or remove it"));
}

bool TooManyPixels(uint32_t width, uint32_t height, char* message,
                   size_t size) {
  const int64_t pixels = int64_t{width} * height;
  if (pixels <= kMaxImagePixels) return false;
  std::snprintf(message, size,
                "%ux%u is %lld pixels, more than the %lld PIL accepts "
                "(DecompressionBombError)",
                width, height, static_cast<long long>(pixels),
                static_cast<long long>(kMaxImagePixels));
  return true;
}

}  // namespace internal

absl::StatusOr<RgbImage> DecodeRgbImage(absl::string_view bytes,
                                        absl::string_view name) {
  if (absl::StartsWith(bytes, "\x89PNG\r\n\x1a\n")) {
    return internal::DecodePng(bytes, name);
  }
  if (absl::StartsWith(bytes, "\xff\xd8\xff")) {
    return internal::DecodeJpeg(bytes, name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": expected a PNG or JPEG image, found ", Describe(bytes),
      "; tandem decodes PNG and JPEG only: convert the file or move it out of "
      "the image folder"));
}

absl::StatusOr<RgbImage> LoadRgbImage(const std::string& path) {
  // base/input_file.h: a regular file, or a FIFO refused after 30 s without
  // a writer (never a block in open() for ever); never a device (a link to
  // /dev/zero); never more bytes than the largest image decoded can take,
  // so an 8 GiB file named .png is refused by its size, not read.
  absl::StatusOr<std::string> bytes =
      ReadInputFile(path, {.max_bytes = kMaxImageFileBytes});
  if (!bytes.ok()) {
    return absl::Status(
        bytes.status().code(),
        absl::StrCat("cannot read the image: ", bytes.status().message(),
                     "; move it out of the image folder"));
  }
  return DecodeRgbImage(*bytes, path);
}

}  // namespace tandem::train

// Decoding PNG and JPEG files to 8-bit RGB pixels, the way torchvision's
// ImageFolder loads them: PIL's Image.open(path).convert("RGB").
//
//   TANDEM_ASSIGN_OR_RETURN(RgbImage image, LoadRgbImage("cats/001.png"));
//   // image.pixels: image.height rows of image.width (r, g, b) bytes
//
// The format is chosen by the file's content, not its name (as PIL does):
// PNG through libpng, JPEG through libjpeg-turbo (Debian's libpng-dev and
// libjpeg62-turbo-dev). What PIL's convert("RGB") does, so does this:
// - greyscale (1, 2, 4, 8 bits) is replicated into r = g = b, low bit depths
//   scaled to 0..255 by repeating their bits (0, 0x55, 0xaa, 0xff for 2-bit);
// - palette images are looked up in their palette;
// - alpha (RGBA, grey + alpha, a tRNS chunk) is dropped, not composited;
// - 16-bit RGB, RGBA and grey + alpha keep each sample's high byte;
// - gamma, colour profiles and EXIF orientation are ignored;
// - JPEG: libjpeg's defaults (islow DCT, fancy upsampling), which PIL uses.
// Not converted, an error instead (InvalidArgument, naming the file, the mode
// and what to do): 16-bit greyscale PNG (PIL reads it as mode "I" and
// convert("RGB") clips every value above 255 to white, which no user wants),
// CMYK and YCCK JPEG. Files that are no PNG or JPEG (GIF, BMP, TIFF, WebP,
// PPM, text, empty) fail naming what they seem to be; a file that ends early
// fails as truncated (DataLoss); more than 2 * 89478485 pixels fails as PIL's
// DecompressionBombError does. Corruption that libjpeg recovers from (extra
// bytes between markers) is a warning in libjpeg and PIL alike and does not
// fail.
//
// Error handling: libpng and libjpeg report errors by longjmp; each decoder
// jumps only within a frame that holds no C++ object with a destructor, and
// frees every libpng/libjpeg structure on every path (checked under
// --config=asan by image_decode_test). Thread-safe: no shared state.
#ifndef TANDEM_TRAIN_DATA_IMAGE_DECODE_H_
#define TANDEM_TRAIN_DATA_IMAGE_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::train {

struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  // height * width * 3 bytes, row after row, r g b per pixel.
  std::vector<uint8_t> pixels;

  uint8_t at(int64_t y, int64_t x, int c) const {
    return pixels[static_cast<size_t>((y * width + x) * 3 + c)];
  }
};

// PIL's decompression-bomb limit: twice Image.MAX_IMAGE_PIXELS.
inline constexpr int64_t kMaxImagePixels = 2 * 89478485LL;

// The largest image file LoadRgbImage reads: kMaxImagePixels at 8 bytes a
// pixel (16-bit RGBA stored uncompressed, the largest a PNG of that many
// pixels holds) and 64 MiB for chunks and metadata. Beyond it no image it
// could decode fits, so the file is refused by its size, unread.
inline constexpr int64_t kMaxImageFileBytes =
    8 * kMaxImagePixels + (int64_t{64} << 20);

// Decodes `bytes` (a whole file); `name` only labels errors.
absl::StatusOr<RgbImage> DecodeRgbImage(absl::string_view bytes,
                                        absl::string_view name);

// Reads the file at `path` and decodes it; a file that cannot be read fails
// naming it and the reason: a device or directory in its place, a FIFO no
// one writes within 30 s, more than kMaxImageFileBytes, or the system's
// error.
absl::StatusOr<RgbImage> LoadRgbImage(const std::string& path);

namespace internal {
// The two decoders behind DecodeRgbImage, for content already known to start
// with the format's signature.
absl::StatusOr<RgbImage> DecodePng(absl::string_view bytes,
                                   absl::string_view name);
absl::StatusOr<RgbImage> DecodeJpeg(absl::string_view bytes,
                                    absl::string_view name);

// The decoders' one error form: "<name>: cannot decode this <format>:
// <reason>", DataLoss for a truncated or corrupt file (saying so),
// InvalidArgument for an unsupported one.
absl::Status DecodeError(absl::string_view name, absl::string_view format,
                         absl::string_view reason, bool truncated,
                         bool unsupported);

// Whether width x height exceeds kMaxImagePixels; if so, writes the reason
// into message[0, size).
bool TooManyPixels(uint32_t width, uint32_t height, char* message, size_t size);
}  // namespace internal

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_IMAGE_DECODE_H_

// PNG through libpng 1.6: see image_decode.h for what is converted and how.
//
// libpng reports errors by png_longjmp. Only ReadSteps calls setjmp, and it
// holds no C++ object with a destructor: everything that needs freeing lives
// in a PngState owned by DecodePng, which frees it on every path.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "train/data/image_decode.h"

namespace tandem::train::internal {
namespace {

struct PngState {
  const unsigned char* data = nullptr;
  size_t size = 0;
  size_t position = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  // libpng's or our own reason for a failure.
  char message[256] = {0};
  bool truncated = false;
  bool unsupported = false;
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  int channels = 0;
  std::vector<unsigned char> buffer;  // height rows of rowbytes
  std::vector<png_bytep> rows;
};

void SetMessage(PngState* state, const char* text) {
  std::snprintf(state->message, sizeof(state->message), "%s", text);
}

// libpng's error callback: must not return (libpng's contract).
[[noreturn]] void OnError(png_structp png, png_const_charp text) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  if (state->message[0] == '\0') SetMessage(state, text);
  png_longjmp(png, 1);
}

// Warnings (bad ancillary chunks, for example) do not stop PIL either.
void OnWarning(png_structp, png_const_charp) {}

void OnRead(png_structp png, png_bytep out, png_size_t count) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (state->size - state->position < count) {
    state->truncated = true;
    std::snprintf(state->message, sizeof(state->message),
                  "the file ends after %zu bytes, in the middle of the image "
                  "data",
                  state->size);
    png_error(png, state->message);
  }
  std::memcpy(out, state->data + state->position, count);
  state->position += count;
}

// Every libpng call that can fail; false with state->message set on failure.
bool ReadSteps(PngState* state) {
  if (setjmp(png_jmpbuf(state->png))) return false;
  png_set_read_fn(state->png, state, OnRead);
  png_read_info(state->png, state->info);
  int bit_depth = 0;
  int color_type = 0;
  png_get_IHDR(state->png, state->info, &state->width, &state->height,
               &bit_depth, &color_type, nullptr, nullptr, nullptr);
  if (bit_depth == 16 && color_type == PNG_COLOR_TYPE_GRAY) {
    state->unsupported = true;
    SetMessage(state,
               "16-bit greyscale PNG: unsupported mode (PIL reads it as mode "
               "\"I\" and its convert(\"RGB\") clips every value above 255 to "
               "white); save it as 8-bit greyscale or RGB");
    return false;
  }
  if (TooManyPixels(state->width, state->height, state->message,
                    sizeof(state->message))) {
    state->unsupported = true;
    return false;
  }
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(state->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(state->png);
  }
  if (bit_depth == 16) png_set_strip_16(state->png);  // keeps the high byte
  png_set_interlace_handling(state->png);
  png_read_update_info(state->png, state->info);
  state->channels = png_get_channels(state->png, state->info);
  const size_t row_bytes = png_get_rowbytes(state->png, state->info);
  if (png_get_bit_depth(state->png, state->info) != 8 ||
      row_bytes != static_cast<size_t>(state->channels) * state->width) {
    state->unsupported = true;
    SetMessage(state, "libpng did not expand it to 8 bits per sample");
    return false;
  }
  state->buffer.resize(row_bytes * state->height);
  state->rows.resize(state->height);
  for (png_uint_32 y = 0; y < state->height; ++y) {
    state->rows[y] = state->buffer.data() + y * row_bytes;
  }
  // The trailing chunks (png_read_end) are not read: PIL does not need them
  // either, so a file cut after its image data still decodes in both.
  png_read_image(state->png, state->rows.data());
  return true;
}

}  // namespace

absl::StatusOr<RgbImage> DecodePng(absl::string_view bytes,
                                   absl::string_view name) {
  PngState state;
  state.data = reinterpret_cast<const unsigned char*>(bytes.data());
  state.size = bytes.size();
  state.png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, OnError, OnWarning);
  if (state.png != nullptr) state.info = png_create_info_struct(state.png);
  if (state.png == nullptr || state.info == nullptr) {
    png_destroy_read_struct(&state.png, nullptr, nullptr);
    return absl::ResourceExhaustedError(
        absl::StrCat(name, ": libpng could not allocate its decoder"));
  }
  const bool ok = ReadSteps(&state);
  png_destroy_read_struct(&state.png, &state.info, nullptr);
  if (!ok) {
    return DecodeError(name, "PNG", state.message, state.truncated,
                       state.unsupported);
  }
  RgbImage image;
  image.width = state.width;
  image.height = state.height;
  image.pixels.resize(static_cast<size_t>(image.width * image.height * 3));
  const int channels = state.channels;
  const size_t n = static_cast<size_t>(image.width * image.height);
  const unsigned char* in = state.buffer.data();
  uint8_t* out = image.pixels.data();
  // 1: grey, 2: grey + alpha, 3: RGB, 4: RGBA; alpha is dropped.
  for (size_t i = 0; i < n; ++i, in += channels, out += 3) {
    if (channels <= 2) {
      out[0] = out[1] = out[2] = in[0];
    } else {
      out[0] = in[0];
      out[1] = in[1];
      out[2] = in[2];
    }
  }
  return image;
}

}  // namespace tandem::train::internal

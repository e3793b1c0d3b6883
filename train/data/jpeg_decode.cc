// JPEG through libjpeg-turbo: see image_decode.h for what is converted and
// how.
//
// libjpeg reports errors through error_exit, which must not return; ours
// longjmps back into ReadSteps, the only function that calls setjmp, which
// holds no C++ object with a destructor. Everything that needs freeing lives
// in a JpegState owned by DecodeJpeg, which frees it on every path.
#include <cstdio>
// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "train/data/image_decode.h"

namespace tandem::train::internal {
namespace {

struct JpegState {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr error;  // cinfo.err points here
  std::jmp_buf jump;
  bool truncated = false;
  bool unsupported = false;
  char message[JMSG_LENGTH_MAX + 200] = {0};
  std::vector<unsigned char> pixels;  // height * width * components
  int components = 0;
};

JpegState* StateOf(j_common_ptr cinfo) {
  // cinfo is &state->cinfo (client_data is set to the state).
  return static_cast<JpegState*>(cinfo->client_data);
}

[[noreturn]] void OnError(j_common_ptr cinfo) {
  JpegState* state = StateOf(cinfo);
  (*cinfo->err->format_message)(cinfo, state->message);
  std::longjmp(state->jump, 1);
}

// Warnings (level -1) are corruption libjpeg recovered from; PIL ignores
// them, so do we, except running out of data: libjpeg would pad the image
// with grey where PIL raises "image file is truncated".
void OnMessage(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    JpegState* state = StateOf(cinfo);
    state->truncated = true;
    (*cinfo->err->format_message)(cinfo, state->message);
    std::longjmp(state->jump, 1);
  }
  if (level == -1) cinfo->err->num_warnings++;
}

bool ReadSteps(JpegState* state, const unsigned char* data, size_t size) {
  if (setjmp(state->jump)) return false;
  jpeg_create_decompress(&state->cinfo);  // keeps err and client_data
  jpeg_mem_src(&state->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&state->cinfo, TRUE);
  jpeg_decompress_struct& cinfo = state->cinfo;
  switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
      cinfo.out_color_space = JCS_GRAYSCALE;
      break;
    case JCS_YCbCr:
    case JCS_RGB:
      cinfo.out_color_space = JCS_RGB;
      break;
    default:
      state->unsupported = true;
      std::snprintf(state->message, sizeof(state->message),
                    "a %s JPEG: unsupported mode (tandem does not reproduce "
                    "PIL's CMYK to RGB conversion); save it as RGB",
                    cinfo.jpeg_color_space == JCS_CMYK   ? "CMYK"
                    : cinfo.jpeg_color_space == JCS_YCCK ? "YCCK"
                                                         : "4-channel");
      return false;
  }
  if (TooManyPixels(cinfo.image_width, cinfo.image_height, state->message,
                    sizeof(state->message))) {
    state->unsupported = true;
    return false;
  }
  jpeg_start_decompress(&cinfo);
  state->components = cinfo.output_components;
  const size_t row_bytes =
      static_cast<size_t>(cinfo.output_width) * cinfo.output_components;
  state->pixels.resize(row_bytes * cinfo.output_height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = state->pixels.data() + row_bytes * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  // Not jpeg_finish_decompress: it reads on to the end marker, which PIL
  // does not need either (a file cut after the last scan decodes in both).
  return true;
}

}  // namespace

absl::StatusOr<RgbImage> DecodeJpeg(absl::string_view bytes,
                                    absl::string_view name) {
  JpegState state;
  std::memset(&state.cinfo, 0, sizeof(state.cinfo));
  state.cinfo.err = jpeg_std_error(&state.error);
  state.error.error_exit = OnError;
  state.error.emit_message = OnMessage;
  state.cinfo.client_data = &state;
  const bool ok =
      ReadSteps(&state, reinterpret_cast<const unsigned char*>(bytes.data()),
                bytes.size());
  const int width = static_cast<int>(state.cinfo.output_width);
  const int height = static_cast<int>(state.cinfo.output_height);
  // Safe on every path: a no-op when jpeg_create_decompress never ran (the
  // struct was zeroed) or failed before allocating.
  jpeg_destroy_decompress(&state.cinfo);
  if (!ok) {
    return DecodeError(name, "JPEG", state.message, state.truncated,
                       state.unsupported);
  }
  RgbImage image;
  image.width = width;
  image.height = height;
  const size_t n = static_cast<size_t>(image.width * image.height);
  if (state.components == 3) {
    image.pixels = std::move(state.pixels);
  } else {  // greyscale: r = g = b
    image.pixels.resize(n * 3);
    for (size_t i = 0; i < n; ++i) {
      image.pixels[3 * i] = image.pixels[3 * i + 1] = image.pixels[3 * i + 2] =
          state.pixels[i];
    }
  }
  return image;
}

}  // namespace tandem::train::internal

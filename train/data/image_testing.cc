#include "train/data/image_testing.h"

#include <png.h>

#include <cstdio>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "train/data/csv_dataset.h"
#include "train/data/dataset.h"

namespace tandem::train::testing {
namespace {

// As in the decoders: the setjmp frames below hold no C++ object with a
// destructor; what must be freed lives in the state their caller owns.
struct PngWriteState {
  std::string out;
  char message[256] = {0};
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<png_bytep> rows;
};

[[noreturn]] void OnPngError(png_structp png, png_const_charp text) {
  auto* state = static_cast<PngWriteState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", text);
  png_longjmp(png, 1);
}

void OnPngWrite(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngWriteState*>(png_get_io_ptr(png))
      ->out.append(reinterpret_cast<const char*>(data), n);
}

bool PngWriteSteps(PngWriteState* state, const PngSpec* spec) {
  if (setjmp(png_jmpbuf(state->png))) return false;
  png_set_write_fn(state->png, state, OnPngWrite, nullptr);
  png_set_IHDR(state->png, state->info, spec->width, spec->height,
               spec->bit_depth, spec->color_type,
               spec->interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!spec->palette.empty()) {
    png_color palette[256];
    const int n = static_cast<int>(spec->palette.size() / 3);
    for (int i = 0; i < n; ++i) {
      palette[i] = {spec->palette[3 * i], spec->palette[3 * i + 1],
                    spec->palette[3 * i + 2]};
    }
    png_set_PLTE(state->png, state->info, palette, n);
  }
  if (!spec->trns.empty()) {
    png_set_tRNS(state->png, state->info, spec->trns.data(),
                 static_cast<int>(spec->trns.size()), nullptr);
  }
  png_write_info(state->png, state->info);
  png_write_image(state->png, state->rows.data());
  png_write_end(state->png, nullptr);
  return true;
}

struct JpegWriteState {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr error;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {0};
  unsigned char* buffer = nullptr;  // jpeg_mem_dest's, freed with free()
  unsigned long size = 0;
};

[[noreturn]] void OnJpegError(j_common_ptr cinfo) {
  auto* state = static_cast<JpegWriteState*>(cinfo->client_data);
  (*cinfo->err->format_message)(cinfo, state->message);
  std::longjmp(state->jump, 1);
}

bool JpegWriteSteps(JpegWriteState* state, int width, int height,
                    int components, const uint8_t* pixels, int quality) {
  if (setjmp(state->jump)) return false;
  jpeg_create_compress(&state->cinfo);
  jpeg_mem_dest(&state->cinfo, &state->buffer, &state->size);
  state->cinfo.image_width = width;
  state->cinfo.image_height = height;
  state->cinfo.input_components = components;
  state->cinfo.in_color_space = components == 1   ? JCS_GRAYSCALE
                                : components == 3 ? JCS_RGB
                                                  : JCS_CMYK;
  jpeg_set_defaults(&state->cinfo);
  jpeg_set_quality(&state->cinfo, quality, TRUE);
  jpeg_start_compress(&state->cinfo, TRUE);
  while (state->cinfo.next_scanline < state->cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(
        pixels +
        static_cast<size_t>(state->cinfo.next_scanline) * width * components);
    jpeg_write_scanlines(&state->cinfo, &row, 1);
  }
  jpeg_finish_compress(&state->cinfo);
  return true;
}

uint8_t Level(int v) { return static_cast<uint8_t>((v * 255 + 8) / 16); }

// A class's colour for grey level g.
void Tint(int digit, uint8_t g, uint8_t* rgb) {
  rgb[0] = g;
  rgb[1] = static_cast<uint8_t>(g * (9 - digit) / 9);
  rgb[2] = static_cast<uint8_t>((255 - g) * digit / 9);
}

}  // namespace

absl::StatusOr<std::string> EncodePng(const PngSpec& spec) {
  PngWriteState state;
  state.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &state, OnPngError,
                                      nullptr);
  if (state.png != nullptr) state.info = png_create_info_struct(state.png);
  if (state.info == nullptr) {
    png_destroy_write_struct(&state.png, nullptr);
    return absl::ResourceExhaustedError("libpng: no memory");
  }
  const int channels = spec.color_type == 0 || spec.color_type == 3 ? 1
                       : spec.color_type == 4                       ? 2
                       : spec.color_type == 2                       ? 3
                                                                    : 4;
  const size_t row_bytes =
      (static_cast<size_t>(spec.width) * channels * spec.bit_depth + 7) / 8;
  if (spec.samples.size() != row_bytes * spec.height) {
    png_destroy_write_struct(&state.png, &state.info);
    return absl::InvalidArgumentError(
        absl::StrCat("EncodePng: ", spec.samples.size(), " bytes, expected ",
                     row_bytes * spec.height));
  }
  for (int y = 0; y < spec.height; ++y) {
    state.rows.push_back(const_cast<png_bytep>(spec.samples.data()) +
                         y * row_bytes);
  }
  const bool ok = PngWriteSteps(&state, &spec);
  png_destroy_write_struct(&state.png, &state.info);
  if (!ok) return absl::InternalError(absl::StrCat("libpng: ", state.message));
  return std::move(state.out);
}

absl::StatusOr<std::string> EncodeJpeg(int width, int height, int components,
                                       const std::vector<uint8_t>& pixels,
                                       int quality) {
  if (pixels.size() != static_cast<size_t>(width) * height * components) {
    return absl::InvalidArgumentError("EncodeJpeg: wrong pixel count");
  }
  JpegWriteState state;
  std::memset(&state.cinfo, 0, sizeof(state.cinfo));
  state.cinfo.err = jpeg_std_error(&state.error);
  state.error.error_exit = OnJpegError;
  state.cinfo.client_data = &state;
  const bool ok =
      JpegWriteSteps(&state, width, height, components, pixels.data(), quality);
  jpeg_destroy_compress(&state.cinfo);
  std::string out;
  if (state.buffer != nullptr) {
    out.assign(reinterpret_cast<const char*>(state.buffer), state.size);
    std::free(state.buffer);
  }
  if (!ok) return absl::InternalError(absl::StrCat("libjpeg: ", state.message));
  return out;
}

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      error);
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> EncodeRgbPng(const RgbImage& image) {
  return EncodePng({.width = static_cast<int>(image.width),
                    .height = static_cast<int>(image.height),
                    .color_type = PNG_COLOR_TYPE_RGB,
                    .samples = image.pixels});
}

absl::StatusOr<DigitsFolder> WriteDigitsFolder(const std::string& root,
                                               const std::string& csv_path,
                                               int per_class) {
  TANDEM_ASSIGN_OR_RETURN(TensorDataset digits,
                          LoadCsvDataset(csv_path, {.num_classes = 10}));
  const float* x = digits.features.data<float>();
  const int64_t* y = digits.labels.data<int64_t>();
  DigitsFolder folder{root, 0, {}, {}};
  std::vector<int> written(10, 0);
  for (int64_t row = 0; row < digits.size(); ++row) {
    const int digit = static_cast<int>(y[row]);
    const int j = written[digit];
    if (j >= per_class) continue;
    ++written[digit];
    // The 32x32 grey levels, each 8x8 value repeated over 4x4 pixels.
    std::vector<uint8_t> grey(32 * 32);
    for (int py = 0; py < 32; ++py) {
      for (int px = 0; px < 32; ++px) {
        grey[py * 32 + px] =
            Level(static_cast<int>(x[row * 64 + (py / 4) * 8 + px / 4]));
      }
    }
    RgbImage rgb{32, 32, std::vector<uint8_t>(32 * 32 * 3)};
    for (int i = 0; i < 32 * 32; ++i) Tint(digit, grey[i], &rgb.pixels[3 * i]);
    const std::string dir = absl::StrCat(digit, "/");
    std::string name;
    std::string bytes;
    switch (j % 4) {
      case 0: {
        name = absl::StrFormat("img_%03d.png", j);
        TANDEM_ASSIGN_OR_RETURN(bytes, EncodeRgbPng(rgb));
        folder.png.push_back({dir + name, rgb});
        break;
      }
      case 1: {
        name = absl::StrFormat("img_%03d.PNG", j);
        TANDEM_ASSIGN_OR_RETURN(bytes,
                                EncodePng({.width = 32,
                                           .height = 32,
                                           .color_type = PNG_COLOR_TYPE_GRAY,
                                           .samples = grey}));
        RgbImage expected{32, 32, {}};
        for (uint8_t g : grey)
          expected.pixels.insert(expected.pixels.end(), 3, g);
        folder.png.push_back({dir + name, expected});
        break;
      }
      case 2: {
        name =
            absl::StrFormat(j % 8 == 2 ? "img_%03d.jpg" : "Img_%03d.JPEG", j);
        TANDEM_ASSIGN_OR_RETURN(bytes, EncodeJpeg(32, 32, 3, rgb.pixels, 90));
        folder.jpeg.push_back({dir + name, rgb});
        break;
      }
      default: {
        // Palette: the 17 levels in the class's colours; sub-folders in
        // class 3 ("sub-x" sorts before "sub/deeper", as in Python).
        name = digit != 3   ? absl::StrFormat("img_%03d.png", j)
               : j % 8 == 3 ? absl::StrFormat("sub/deeper/p_%03d.png", j)
                            : absl::StrFormat("sub-x/p_%03d.png", j);
        PngSpec spec{.width = 32, .height = 32, .color_type = 3};
        for (int v = 0; v <= 16; ++v) {
          uint8_t c[3];
          Tint(digit, Level(v), c);
          spec.palette.insert(spec.palette.end(), c, c + 3);
        }
        for (int i = 0; i < 32 * 32; ++i) {
          spec.samples.push_back(static_cast<uint8_t>(
              x[row * 64 + (i / 32 / 4) * 8 + (i % 32) / 4]));
        }
        TANDEM_ASSIGN_OR_RETURN(bytes, EncodePng(spec));
        folder.png.push_back({dir + name, rgb});
        break;
      }
    }
    TANDEM_RETURN_IF_ERROR(
        WriteFile(absl::StrCat(root, "/", dir, name), bytes));
    ++folder.images;
  }
  // Skipped by the extension rule, as torchvision skips it.
  TANDEM_RETURN_IF_ERROR(WriteFile(root + "/0/notes.txt", "not an image\n"));
  return folder;
}

}  // namespace tandem::train::testing

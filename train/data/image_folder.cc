#include "train/data/image_folder.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "train/data/image_decode.h"

namespace tandem::train {
namespace {

// os.path.join(a, b) for a relative name b.
std::string Join(const std::string& a, const std::string& b) {
  if (a.empty() || a.back() == '/') return a + b;
  return absl::StrCat(a, "/", b);
}

struct DirEntry {
  std::string name;
  bool is_dir = false;  // following symbolic links; false when stat fails
};

// The entries of `dir` but . and .., unsorted.
absl::StatusOr<std::vector<DirEntry>> ListDir(const std::string& dir) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) {
    const int error = errno;
    return absl::NotFoundError(
        absl::StrCat("ImageFolderDataset: cannot read "
                     "the folder ",
                     dir, ": ", std::strerror(error)));
  }
  std::vector<DirEntry> entries;
  errno = 0;
  while (const dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = entry->d_type == DT_DIR;
    if (entry->d_type == DT_LNK || entry->d_type == DT_UNKNOWN) {
      // What os.scandir's is_dir() does: follow the link; a broken one is
      // no directory.
      struct stat info;
      is_dir =
          stat(Join(dir, name).c_str(), &info) == 0 && S_ISDIR(info.st_mode);
    }
    entries.push_back({name, is_dir});
    errno = 0;
  }
  const int error = errno;
  closedir(handle);
  if (error != 0) {
    return absl::DataLossError(absl::StrCat("ImageFolderDataset: listing ", dir,
                                            " failed: ", std::strerror(error)));
  }
  return entries;
}

// A folder's identity, to recognise a symbolic-link cycle.
using FolderId = std::pair<dev_t, ino_t>;

absl::StatusOr<FolderId> IdOf(const std::string& dir) {
  struct stat info;
  if (stat(dir.c_str(), &info) != 0) {
    const int error = errno;
    return absl::NotFoundError(absl::StrCat("ImageFolderDataset: cannot stat ",
                                            dir, ": ", std::strerror(error)));
  }
  return FolderId{info.st_dev, info.st_ino};
}

struct WalkedFolder {
  std::string path;
  std::vector<std::string> files;  // names of the non-directories
};

// os.walk(dir, followlinks=True): `dir` and every folder below it, each with
// its non-directory entries. `ancestors` holds the folders on the path from
// the class folder down to `dir`'s parent.
absl::Status Walk(const std::string& dir, std::set<FolderId>& ancestors,
                  std::vector<WalkedFolder>& out) {
  TANDEM_ASSIGN_OR_RETURN(const FolderId id, IdOf(dir));
  if (!ancestors.insert(id).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("ImageFolderDataset: ", dir,
                     " is one of its own parent folders again (a cycle of "
                     "symbolic links); remove the link"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDir(dir));
  WalkedFolder here{dir, {}};
  std::vector<std::string> subfolders;
  for (DirEntry& entry : entries) {
    if (entry.is_dir) {
      subfolders.push_back(Join(dir, entry.name));
    } else {
      here.files.push_back(std::move(entry.name));
    }
  }
  out.push_back(std::move(here));
  for (const std::string& sub : subfolders) {
    TANDEM_RETURN_IF_ERROR(Walk(sub, ancestors, out));
  }
  ancestors.erase(id);
  return absl::OkStatus();
}

// has_file_allowed_extension: the name, lower-cased (ASCII), ends with one
// of `extensions`.
bool HasAllowedExtension(const std::string& name,
                         const std::vector<std::string>& extensions) {
  std::string lower = name;
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  for (const std::string& ext : extensions) {
    if (lower.size() >= ext.size() &&
        lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ImageFolderDataset>>
ImageFolderDataset::Create(const std::string& root,
                           const ImageFolderOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckImageTransform(options.transform));
  for (const std::string& ext : options.extensions) {
    if (ext.empty() || std::any_of(ext.begin(), ext.end(), [](char c) {
          return c >= 'A' && c <= 'Z';
        })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ImageFolderDataset: extension \"", ext,
          "\" must be non-empty and lower-case (matching ignores case)"));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<DirEntry> top, ListDir(root));
  std::vector<std::string> classes;
  for (DirEntry& entry : top) {
    if (entry.is_dir) classes.push_back(std::move(entry.name));
  }
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "ImageFolderDataset: no class folder in ", root,
        "; expected one sub-folder per class (root/<class>/<image>), as "
        "torchvision's ImageFolder reads"));
  }

  std::vector<Entry> samples;
  std::vector<std::string> empty_classes;
  for (size_t label = 0; label < classes.size(); ++label) {
    std::vector<WalkedFolder> folders;
    std::set<FolderId> ancestors;
    TANDEM_RETURN_IF_ERROR(
        Walk(Join(root, classes[label]), ancestors, folders));
    std::sort(folders.begin(), folders.end(),
              [](const WalkedFolder& a, const WalkedFolder& b) {
                return a.path < b.path;
              });
    const size_t before = samples.size();
    for (WalkedFolder& folder : folders) {
      std::sort(folder.files.begin(), folder.files.end());
      for (const std::string& name : folder.files) {
        if (HasAllowedExtension(name, options.extensions)) {
          samples.push_back(
              {Join(folder.path, name), static_cast<int64_t>(label)});
        }
      }
    }
    if (samples.size() == before) empty_classes.push_back(classes[label]);
  }
  if (!empty_classes.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "ImageFolderDataset: ", root, ": found no valid file for the classes ",
        absl::StrJoin(empty_classes, ", "), "; supported extensions are ",
        absl::StrJoin(options.extensions, ", "),
        ": add images to those folders or remove them"));
  }
  return std::shared_ptr<const ImageFolderDataset>(new ImageFolderDataset(
      root, options, std::move(classes), std::move(samples)));
}

absl::StatusOr<Sample> ImageFolderDataset::Get(int64_t index,
                                               Generator& gen) const {
  if (index < 0 || index >= size()) {
    return absl::OutOfRangeError(absl::StrCat("ImageFolderDataset: index ",
                                              index, " outside [0, ", size(),
                                              ") of ", root_));
  }
  const Entry& entry = samples_[static_cast<size_t>(index)];
  TANDEM_ASSIGN_OR_RETURN(RgbImage image, LoadRgbImage(entry.path));
  TANDEM_ASSIGN_OR_RETURN(
      Tensor features, ApplyImageTransform(std::move(image), options_.transform,
                                           gen, entry.path));
  return Sample{std::move(features), entry.label};
}

std::string ImageFolderDataset::Describe(int64_t index) const {
  if (index < 0 || index >= size()) return absl::StrCat("sample ", index);
  return samples_[static_cast<size_t>(index)].path;
}

}  // namespace tandem::train

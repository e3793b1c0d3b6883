#include "base/run_paths.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::base {
namespace {

// Symbolic links followed by hand before a path counts as unresolvable
// (the kernel's own limit, ELOOP, is 40).
constexpr int kMaxLinks = 40;

// "a//b/" -> "a/b"; "/" stays "/".
std::string WithoutExtraSlashes(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out.push_back(c);
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return WithoutExtraSlashes(path);
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return WithoutExtraSlashes(path);
  return WithoutExtraSlashes(absl::StrCat(cwd, "/", path));
}

// The folder part of an absolute, slash-normalised path ("/" for "/a").
std::string Parent(const std::string& abs) {
  const size_t slash = abs.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : abs.substr(0, slash);
}

std::string Join(const std::string& folder, const std::string& name) {
  return folder == "/" ? absl::StrCat("/", name)
                       : absl::StrCat(folder, "/", name);
}

// `abs` with every existing link followed; see run_paths.h.
std::string Resolve(const std::string& abs, int links) {
  char buf[PATH_MAX];
  if (::realpath(abs.c_str(), buf) != nullptr) return buf;
  struct stat st;
  // It exists, but not as a name realpath can give ("/dev/fd/63" -> a
  // pipe): its device and inode identify it.
  if (::stat(abs.c_str(), &st) == 0) return abs;
  if (abs == "/") return abs;
  if (links < kMaxLinks && ::lstat(abs.c_str(), &st) == 0 &&
      S_ISLNK(st.st_mode)) {
    // A link to nothing: a write creates its target.
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlink(abs.c_str(), target.data(), target.size());
    if (n > 0) {
      target.resize(static_cast<size_t>(n));
      const std::string next = WithoutExtraSlashes(
          target[0] == '/' ? target : Join(Parent(abs), target));
      return Resolve(next, links + 1);
    }
  }
  // Missing: resolve the folder, then add the name.
  const std::string name = abs.substr(abs.rfind('/') + 1);
  const std::string folder = Resolve(Parent(abs), links);
  if (name == "." || name.empty()) return folder;
  if (name == "..") return Parent(folder);
  return Join(folder, name);
}

struct Resolved {
  std::string path;
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  bool char_device = false;
};

Resolved Identify(const std::string& path) {
  Resolved r;
  r.path = ResolvedPath(path);
  struct stat st;
  // The user's spelling first: it follows links the way a write would,
  // including "/dev/fd/N", which has no resolvable name.
  if (::stat(path.c_str(), &st) == 0 || ::stat(r.path.c_str(), &st) == 0) {
    r.exists = true;
    r.dev = st.st_dev;
    r.ino = st.st_ino;
    r.char_device = S_ISCHR(st.st_mode);
  }
  return r;
}

bool SameFile(const Resolved& a, const Resolved& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.path == b.path;
}

// Whether `inner` lies below the folder `outer` (not equal to it).
bool Inside(const std::string& outer, const std::string& inner) {
  if (outer == "/") return inner != "/";
  return absl::StartsWith(inner, absl::StrCat(outer, "/"));
}

bool IsOutput(const RunPath& p) { return p.role != PathRole::kInput; }

std::string Named(const RunPath& p) {
  return absl::StrCat(p.flag, "=", p.path);
}

// What writing `out` would do to `other`, for the messages.
std::string Harm(const RunPath& out, const RunPath& other) {
  if (other.role == PathRole::kInput) {
    return absl::StrCat("writing ", out.flag, " would destroy what ",
                        other.flag, " reads");
  }
  return absl::StrCat("writing ", out.flag, " would destroy what ", other.flag,
                      " holds");
}

// The conflict between `a` and `b` (at least one an output), or "".
std::string Conflict(const RunPath& a, const Resolved& ra, const RunPath& b,
                     const Resolved& rb) {
  if (ra.char_device || rb.char_device) return "";
  if (SameFile(ra, rb)) {
    // Name as the writer a plain output before a checkpoint folder, then
    // the one declared first.
    const bool a_first = IsOutput(a) && (a.role == PathRole::kOutput ||
                                         b.role != PathRole::kOutput);
    const RunPath& out = a_first ? a : b;
    const Resolved& rout = a_first ? ra : rb;
    const RunPath& other = a_first ? b : a;
    const Resolved& rother = a_first ? rb : ra;
    const std::string where =
        rout.path == rother.path
            ? rout.path
            : absl::StrCat(rout.path, " and ", rother.path, " are one file");
    return absl::StrCat(Named(out), " and ", Named(other),
                        " are the same path (", where, "): ", Harm(out, other),
                        "; give ", out.flag, " a path of its own");
  }
  // An output inside another path's folder: the inner one is the writer.
  for (const auto& [inner, rinner, outer, router] :
       {std::tuple(&a, &ra, &b, &rb), std::tuple(&b, &rb, &a, &ra)}) {
    if (IsOutput(*inner) && Inside(router->path, rinner->path)) {
      return absl::StrCat(Named(*inner), " is inside ", Named(*outer), " (",
                          router->path, "): ", Harm(*inner, *outer), "; give ",
                          inner->flag, " a path outside ", router->path);
    }
  }
  // An output folder holding an input.
  for (const auto& [outer, router, inner, rinner] :
       {std::tuple(&a, &ra, &b, &rb), std::tuple(&b, &rb, &a, &ra)}) {
    if (IsOutput(*outer) && Inside(router->path, rinner->path)) {
      return absl::StrCat(Named(*outer), " is a folder that holds ",
                          Named(*inner), " (", rinner->path,
                          "): ", Harm(*outer, *inner), "; give ", outer->flag,
                          " a folder that holds no other input or output of "
                          "the run");
    }
  }
  for (const auto& [p, rp, q, rq] :
       {std::tuple(&a, &ra, &b, &rb), std::tuple(&b, &rb, &a, &ra)}) {
    if (p->rank_parts && IsOutput(*p) && IsRankPart(rp->path, rq->path)) {
      return absl::StrCat(
          Named(*q), " is one of ", Named(*p), "'s per-rank parts (", rq->path,
          ", written and removed by the run); give ", q->flag, " another name");
    }
  }
  return "";
}

}  // namespace

bool IsRankPart(const std::string& base, const std::string& path) {
  const std::string prefix = absl::StrCat(base, ".rank");
  if (!absl::StartsWith(path, prefix) || path.size() == prefix.size()) {
    return false;
  }
  for (size_t i = prefix.size(); i < path.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(path[i]))) return false;
  }
  return true;
}

std::string ResolvedPath(const std::string& path) {
  return Resolve(Absolute(path), 0);
}

absl::Status CheckRunPaths(const std::vector<RunPath>& paths) {
  std::vector<const RunPath*> used;
  std::vector<Resolved> resolved;
  for (const RunPath& p : paths) {
    if (p.path.empty()) continue;
    used.push_back(&p);
    resolved.push_back(Identify(p.path));
  }
  std::vector<std::string> conflicts;
  for (size_t i = 0; i < used.size(); ++i) {
    for (size_t j = i + 1; j < used.size(); ++j) {
      if (!IsOutput(*used[i]) && !IsOutput(*used[j])) continue;
      std::string c = Conflict(*used[i], resolved[i], *used[j], resolved[j]);
      if (!c.empty()) conflicts.push_back(std::move(c));
    }
  }
  if (conflicts.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      absl::StrJoin(conflicts, "; "), ". Nothing was read or written."));
}

}  // namespace tandem::base

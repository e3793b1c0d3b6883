#include "train/parallel/core/config_agreement.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {
namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

// "<len>:<name><len>:<value>" per entry: any bytes survive the trip.
std::string Encode(const std::vector<ConfigEntry>& entries) {
  std::string out;
  for (const ConfigEntry& e : entries) {
    absl::StrAppend(&out, e.name.size(), ":", e.name, e.value.size(), ":",
                    e.value);
  }
  return out;
}

// Reads one "<len>:<bytes>" at `pos`; false when malformed.
bool ReadField(const std::string& s, size_t& pos, std::string& field) {
  const size_t colon = s.find(':', pos);
  if (colon == std::string::npos) return false;
  size_t len = 0;
  const std::from_chars_result r =
      std::from_chars(s.data() + pos, s.data() + colon, len);
  if (r.ec != std::errc() || r.ptr != s.data() + colon ||
      len > s.size() - colon - 1) {
    return false;
  }
  field = s.substr(colon + 1, len);
  pos = colon + 1 + len;
  return true;
}

Entries Decode(const std::string& s) {
  Entries out;
  size_t pos = 0;
  while (pos < s.size()) {
    std::string name;
    std::string value;
    if (!ReadField(s, pos, name) || !ReadField(s, pos, value)) break;
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

// Bytes <-> int64 words (zero padded), the unit AllGatherInt64 moves.
std::vector<int64_t> ToWords(const std::string& bytes, int64_t words) {
  std::vector<int64_t> out(static_cast<size_t>(words), 0);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// "rank 1" or "ranks 0, 2 and 5" (at most 8 named).
std::string RankList(const std::vector<int>& ranks) {
  constexpr size_t kMaxNamed = 8;
  if (ranks.size() == 1) return absl::StrCat("rank ", ranks[0]);
  std::vector<int> named(ranks.begin(),
                         ranks.begin() + std::min(ranks.size(), kMaxNamed));
  if (ranks.size() > kMaxNamed) {
    return absl::StrCat("ranks ", absl::StrJoin(named, ", "), " and ",
                        ranks.size() - kMaxNamed, " more");
  }
  const int last = named.back();
  named.pop_back();
  return absl::StrCat("ranks ", absl::StrJoin(named, ", "), " and ", last);
}

// "--epochs is 3 on rank 0 and 4 on rank 1", or "" when all ranks agree.
std::string DescribeDifference(const std::string& name,
                               const std::vector<Entries>& per_rank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    std::string value = "(absent)";
    for (const auto& [n, v] : per_rank[r]) {
      if (n == name) {
        value = v;
        break;
      }
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == value; });
    if (it == groups.end()) {
      groups.push_back({value, {static_cast<int>(r)}});
    } else {
      it->second.push_back(static_cast<int>(r));
    }
  }
  if (groups.size() == 1) return "";
  std::vector<std::string> parts;
  for (const auto& [value, ranks] : groups) {
    parts.push_back(absl::StrCat(value, " on ", RankList(ranks)));
  }
  const std::string last = parts.back();
  parts.pop_back();
  return absl::StrCat(name, " is ", absl::StrJoin(parts, ", "), " and ", last);
}

std::string Describe(const std::vector<Entries>& per_rank) {
  std::vector<std::string> names;  // in order of first appearance
  for (const Entries& entries : per_rank) {
    for (const auto& entry : entries) {
      if (std::find(names.begin(), names.end(), entry.first) == names.end()) {
        names.push_back(entry.first);
      }
    }
  }
  std::vector<std::string> differences;
  for (const std::string& name : names) {
    std::string d = DescribeDifference(name, per_rank);
    if (!d.empty()) differences.push_back(std::move(d));
  }
  if (differences.empty()) {
    return "the same entries arrive in a different order on some ranks";
  }
  return absl::StrJoin(differences, "; ");
}

}  // namespace

ConfigEntry::ConfigEntry(std::string name, int64_t value)
    : name(std::move(name)), value(absl::StrCat(value)) {}

ConfigEntry::ConfigEntry(std::string name, uint64_t value)
    : name(std::move(name)), value(absl::StrCat(value)) {}

ConfigEntry::ConfigEntry(std::string name, double value)
    : name(std::move(name)) {
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value);
  this->value.assign(buf, r.ptr);  // 64 bytes always suffice
}

uint64_t HashBytes(const void* data, size_t size, uint64_t hash) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string HashHex(uint64_t hash) { return absl::StrFormat("%016x", hash); }

absl::Status CheckRanksAgree(comm::Communicator& comm, Device device,
                             const std::vector<ConfigEntry>& entries) {
  const int n = comm.size();
  const std::string encoded = Encode(entries);
  // Round 1: do the fingerprints agree? One small all-reduce, the same
  // cost per rank at any world size.
  const int64_t fingerprint =
      static_cast<int64_t>(HashBytes(encoded.data(), encoded.size()));
  TANDEM_ASSIGN_OR_RETURN(const bool same,
                          SameOnEveryRank(comm, device, fingerprint));
  if (same) return absl::OkStatus();
  // Round 2: the lengths; round 3: the entries, padded to the longest.
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  TANDEM_RETURN_IF_ERROR(AllGatherInt64(comm, device,
                                        {static_cast<int64_t>(encoded.size())},
                                        absl::MakeSpan(lengths)));
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const int64_t words = (longest + 7) / 8;
  std::vector<int64_t> all(static_cast<size_t>(words * n));
  TANDEM_RETURN_IF_ERROR(AllGatherInt64(comm, device, ToWords(encoded, words),
                                        absl::MakeSpan(all)));
  std::vector<Entries> per_rank;
  for (int r = 0; r < n; ++r) {
    const char* bytes = reinterpret_cast<const char*>(all.data() + r * words);
    per_rank.push_back(Decode(std::string(bytes, lengths[r])));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("ranks disagree on the configuration: ", Describe(per_rank),
                   "; start every rank with the same flags and data"));
}

}  // namespace tandem::train

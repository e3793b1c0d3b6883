#include "train/loop/rank_values.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {

absl::StatusOr<checkpoint::Metadata> GatherRankValues(
    comm::Communicator& comm, Device device, const std::string& who,
    const std::string& prefix, absl::Span<const char* const> names,
    absl::Span<const double> values) {
  const size_t k = names.size();
  if (k == 0 || values.empty() || values.size() % k != 0) {
    return absl::InternalError(absl::StrCat(
        who, ": expected ", k, " epoch sums per rank, found ", values.size()));
  }
  const size_t m = values.size() / k;  // the (virtual) ranks this rank holds
  std::vector<int64_t> send(values.size());
  std::memcpy(send.data(), values.data(), values.size() * sizeof(double));
  std::vector<int64_t> all(values.size() * static_cast<size_t>(comm.size()));
  TANDEM_RETURN_IF_ERROR(
      AllGatherInt64(comm, device, send, absl::MakeSpan(all)));
  checkpoint::Metadata out;
  for (size_t holder = 0; holder < m * comm.size(); ++holder) {
    for (size_t i = 0; i < k; ++i) {
      out[absl::StrCat(prefix, names[i], "_bits.", holder)] =
          absl::StrCat(all[k * holder + i]);
    }
  }
  return out;
}

absl::StatusOr<std::vector<double>> RankValues(
    const checkpoint::Metadata& extra, const std::string& who,
    const std::string& prefix, absl::Span<const char* const> names, int rank) {
  std::vector<double> out;
  for (const char* name : names) {
    const std::string key = absl::StrCat(prefix, name, "_bits.", rank);
    auto it = extra.find(key);
    int64_t bits = 0;
    if (it == extra.end() || !absl::SimpleAtoi(it->second, &bits)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": the checkpoint has no valid \"", key,
          "\" entry for the epoch it resumes in; start from a fresh "
          "--checkpoint_dir"));
    }
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    out.push_back(v);
  }
  return out;
}

}  // namespace tandem::train

// tandem::train::CheckRanksAgree — at start-up, every rank of a
// multi-process run checks that all ranks were given the same configuration
// (the flags that shape the run, and what they loaded), so that per-rank
// flags (MPMD: `mpirun -np 1 toy_ddp --epochs=3 : -np 1 toy_ddp --epochs=4`)
// fail at once with a message instead of hanging or crashing inside the
// engine later.
//
//   TANDEM_RETURN_IF_ERROR(CheckRanksAgree(
//       comm, device, {ConfigEntry("--epochs", config.epochs),
//                      ConfigEntry("--lr", config.lr),
//                      ConfigEntry("dataset hash", HashHex(bytes))}));
//
// Protocol (collective; every rank calls it once, before its other
// collectives): round 1 all-gathers one 64-bit fingerprint of each rank's
// entries — fixed size, so it cannot mismatch even when the ranks disagree
// on everything. Equal fingerprints: OK, one small collective in all.
// Otherwise round 2 all-gathers each rank's encoded length, round 3 each
// rank's entries padded to the longest, and every rank returns the same
// InvalidArgument naming each entry that differs and each rank's value:
//
//   ranks disagree on the configuration: --epochs is 3 on rank 0 and 4 on
//   rank 1; start every rank with the same flags and data
//
// Ranks holding the same value are grouped ("2 on ranks 0, 2 and 3 on rank
// 1"); an entry a rank lacks shows as "(absent)". Each round is bounded by
// the communicator's own timeout; staged through `device` memory when it is
// not the CPU (see train/parallel/core/staged_all_gather.h).
#ifndef TANDEM_TRAIN_PARALLEL_CORE_CONFIG_AGREEMENT_H_
#define TANDEM_TRAIN_PARALLEL_CORE_CONFIG_AGREEMENT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "tensor/device.h"

namespace tandem::train {

// One named value, compared as text. `name` is printed as given: a flag
// ("--epochs") or a derived quantity ("dataset hash").
struct ConfigEntry {
  ConfigEntry(std::string name, std::string value)
      : name(std::move(name)), value(std::move(value)) {}
  ConfigEntry(std::string name, const char* value)
      : ConfigEntry(std::move(name), std::string(value)) {}
  ConfigEntry(std::string name, int64_t value);
  ConfigEntry(std::string name, uint64_t value);
  ConfigEntry(std::string name, int value)
      : ConfigEntry(std::move(name), static_cast<int64_t>(value)) {}
  // The shortest text that reads back as the same double ("0.1", "inf"),
  // so 0.5 and 0.5000000001 differ.
  ConfigEntry(std::string name, double value);

  std::string name;
  std::string value;
};

// OK when every rank passed the same entries (names, values, order);
// InvalidArgument as above otherwise, the same on every rank. Errors of
// the communicator come back as they are.
absl::Status CheckRanksAgree(comm::Communicator& comm, Device device,
                             const std::vector<ConfigEntry>& entries);

// FNV-1a (64-bit) of `size` bytes at `data`, continuing from `hash`: a
// deterministic fingerprint of loaded data, e.g. a dataset's features and
// labels. Not cryptographic.
uint64_t HashBytes(const void* data, size_t size,
                   uint64_t hash = 14695981039346656037ull);

// `hash` as 16 lower-case hex digits.
std::string HashHex(uint64_t hash);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_CONFIG_AGREEMENT_H_

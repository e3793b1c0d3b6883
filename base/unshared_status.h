// A Status that shares nothing with the one it copies, for handing an error
// from one thread to another.
//
// Copying an absl::Status that carries a message shares one heap record
// between the copies, counted by atomics inside Abseil. Debian's Abseil is not
// built with ThreadSanitizer, so TSan sees neither the count nor the order it
// gives: when one thread reads the message and another thread later drops
// the last copy, TSan reports the free as a race with the read (it did, in
// CI, on gloo's worker thread). A Status that crosses threads is therefore
// passed as an unshared copy (or moved, never copied): each thread then
// frees only what it alone owns.
#ifndef TANDEM_BASE_UNSHARED_STATUS_H_
#define TANDEM_BASE_UNSHARED_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace tandem {

// The same code, message and payloads as `status`, in new storage. An OK
// status has no storage and is returned as is. Thread-compatible: the caller
// must hold whatever lock guards `status`.
inline absl::Status UnsharedStatus(const absl::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status copy(status.code(), std::string(status.message()));
  status.ForEachPayload(
      [&copy](absl::string_view type_url, const absl::Cord& payload) {
        copy.SetPayload(type_url, absl::Cord(std::string(payload)));
      });
  return copy;
}

}  // namespace tandem

#endif  // TANDEM_BASE_UNSHARED_STATUS_H_

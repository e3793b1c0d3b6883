// Names the calling thread (as shown by debuggers, top -H, and TSan reports),
// e.g. "GPU3" for a simulated rank. Best effort: names are truncated to the
// platform limit (15 characters on Linux) and ignored where unsupported.
#ifndef TANDEM_SIM_THREAD_NAME_H_
#define TANDEM_SIM_THREAD_NAME_H_

#include <string>

namespace tandem::sim::internal {

void SetCurrentThreadName(const std::string& name);

// The calling thread's name; empty where names are unsupported.
std::string CurrentThreadName();

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_THREAD_NAME_H_

#include "sim/thread_name.h"

#include <string>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace tandem::sim::internal {

#if defined(__linux__)
void SetCurrentThreadName(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

std::string CurrentThreadName() {
  char name[16] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return "";
  return name;
}
#else
void SetCurrentThreadName(const std::string&) {}

std::string CurrentThreadName() { return ""; }
#endif

}  // namespace tandem::sim::internal

#include "comm/line_sink.h"

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::comm {
namespace {

class StdoutSink : public LineSink {
 public:
  void WriteLine(std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }

 private:
  std::mutex mu_;
};

}  // namespace

LineSink& StdoutLineSink() {
  // Never destroyed: ranks may still print while static destructors run.
  static StdoutSink* const sink = new StdoutSink();
  return *sink;
}

void CapturedLines::WriteLine(std::string_view line) {
  std::lock_guard<std::mutex> lock(mu_);
  lines_.emplace_back(line);
}

std::vector<std::string> CapturedLines::Lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

}  // namespace tandem::comm

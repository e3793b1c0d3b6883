#include "sim/output_capture.h"

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "comm/line_sink.h"

namespace tandem::sim {

class OutputCapture::RankSink : public comm::LineSink {
 public:
  RankSink(OutputCapture* owner, int rank) : owner_(owner), rank_(rank) {}
  void WriteLine(std::string_view line) override {
    owner_->Append(rank_, line);
  }

 private:
  OutputCapture* const owner_;
  const int rank_;
};

OutputCapture::OutputCapture() = default;
OutputCapture::~OutputCapture() = default;

void OutputCapture::Reset(int world_size) {
  std::lock_guard<std::mutex> lock(mu_);
  sinks_.clear();
  per_rank_.assign(world_size > 0 ? world_size : 0, {});
  all_.clear();
  for (int r = 0; r < world_size; ++r) {
    sinks_.push_back(std::make_unique<RankSink>(this, r));
  }
}

int OutputCapture::world_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(sinks_.size());
}

void OutputCapture::set_echo(bool echo) {
  std::lock_guard<std::mutex> lock(mu_);
  echo_ = echo;
}

comm::LineSink& OutputCapture::sink(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  return *sinks_.at(rank);
}

void OutputCapture::Append(int rank, std::string_view text) {
  bool echo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    per_rank_[rank].emplace_back(text);
    all_.push_back(Line{rank, std::string(text)});
    echo = echo_;
  }
  if (echo) comm::StdoutLineSink().WriteLine(text);
}

std::vector<std::string> OutputCapture::Lines(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(per_rank_.size())) return {};
  return per_rank_[rank];
}

std::vector<OutputCapture::Line> OutputCapture::AllLines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_;
}

}  // namespace tandem::sim

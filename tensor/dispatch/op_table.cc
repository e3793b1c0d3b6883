#include "tensor/dispatch/op_table.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::internal {
namespace {

const char* TypeName(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kCUDA:
      return "cuda";
    case DeviceType::kSim:
      return "sim";
  }
  return "?";
}

struct Table {
  std::mutex mu;
  // Rows by name; std::deque keeps their addresses stable. Guarded by mu.
  std::map<std::string, OpRow*, std::less<>> by_name;
  std::deque<OpRow> rows;
  // Poisoned rows handed to a conflicting signature (never looked up).
  std::deque<OpRow> poisoned;
  // How many kernels each device type has (error messages only).
  std::array<std::atomic<int>, kNumDeviceTypes> kernel_count{};
};

Table& GetTable() {
  static Table* table = new Table;  // leaked: rows outlive every caller
  return *table;
}

}  // namespace

OpRow* FindOrAddOpRow(const char* name, const char* signature) {
  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.by_name.find(name);
  if (it == t.by_name.end()) {
    OpRow& row = t.rows.emplace_back();
    row.name = name;
    row.signature = signature;
    t.by_name.emplace(row.name, &row);
    return &row;
  }
  if (it->second->signature == signature) return it->second;
  OpRow& bad = t.poisoned.emplace_back();
  bad.name = name;
  bad.signature = signature;
  bad.conflict = absl::StrCat(
      "op ", name,
      " is used with two kernel signatures: ", it->second->signature,
      " (first) and ", signature,
      "; every kernel of an op has the op's one signature (a bug in the code "
      "that defines or registers it)");
  return &bad;
}

absl::Status SetKernel(OpRow* row, DeviceType type, AnyKernel kernel) {
  if (!row->conflict.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "registering a ", TypeName(type), " kernel failed: ", row->conflict));
  }
  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  std::atomic<AnyKernel>& slot = row->kernels[static_cast<size_t>(type)];
  const AnyKernel before = slot.load(std::memory_order_relaxed);
  slot.store(kernel, std::memory_order_release);
  const int delta = (kernel != nullptr) - (before != nullptr);
  t.kernel_count[static_cast<size_t>(type)].fetch_add(
      delta, std::memory_order_relaxed);
  return absl::OkStatus();
}

bool HasAnyKernel(DeviceType type) {
  return GetTable().kernel_count[static_cast<size_t>(type)].load(
             std::memory_order_relaxed) > 0;
}

absl::Status MissingKernel(const OpRow& row, Device device) {
  if (!row.conflict.empty()) return absl::InternalError(row.conflict);
  const std::string where = device.ToString();
  if (!HasAnyKernel(device.type())) {
    if (device.is_sim()) {
      return absl::FailedPreconditionError(absl::StrCat(
          row.name, ": no kernels are registered for ", where,
          ": simulated devices are not installed in this process; call "
          "InstallSimDevices (tensor/sim_device/sim_device.h), e.g. through a "
          "binary's --devices flag or TANDEM_SIM_DEVICES"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        row.name, ": no kernels are registered for ", where,
        ": tandem was built without CUDA, or this binary does not link "
        "//tensor/cuda; add that dependency, or use Device::CPU()"));
  }
  std::vector<std::string> have;
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    if (row.kernels[i].load(std::memory_order_acquire) != nullptr) {
      have.push_back(TypeName(static_cast<DeviceType>(i)));
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "op ", row.name, " has no kernel for ", where, " (it has kernels for: ",
      have.empty() ? "no device" : absl::StrJoin(have, ", "),
      "); move the inputs with To(Device), or register a ",
      TypeName(device.type()),
      " kernel next to that device's code (docs/adding_an_op.md)"));
}

std::vector<std::string> DescribeKernelTable() {
  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<std::string> out;
  for (const auto& [name, row] : t.by_name) {
    std::vector<std::string> have;
    for (int i = 0; i < kNumDeviceTypes; ++i) {
      if (row->kernels[i].load(std::memory_order_acquire) != nullptr) {
        have.push_back(TypeName(static_cast<DeviceType>(i)));
      }
    }
    out.push_back(absl::StrCat(name, ": ", absl::StrJoin(have, " ")));
  }
  return out;
}

}  // namespace tandem::internal

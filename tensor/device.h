// Where a tensor's memory lives: the host (CPU), CUDA device k, or
// simulated device k (host memory and CPU kernels behind a distinct device,
// see tensor/sim_device/sim_device.h).
//
//   Device d = Device::CUDA(1);
//   d.is_cuda();      // true
//   d.index();        // 1
//   d.ToString();     // "cuda:1"
//   Device::CPU() == Device();  // true
//   Device::Sim(2).ToString();  // "sim:2"
//
// A plain value; thread-safe. Naming a CUDA device does not need CUDA: only
// allocating memory there does (see tensor/allocator.h).
#ifndef TANDEM_TENSOR_DEVICE_H_
#define TANDEM_TENSOR_DEVICE_H_

#include <cstdint>
#include <string>

namespace tandem {

enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1, kSim = 2 };

// How many DeviceType values exist (registries index arrays by type).
inline constexpr int kNumDeviceTypes = 3;

class Device {
 public:
  // The CPU.
  constexpr Device() = default;
  static constexpr Device CPU() { return Device(); }
  // CUDA device `index` (>= 0; the ordinal after CUDA_VISIBLE_DEVICES).
  static constexpr Device CUDA(int index) {
    return Device(DeviceType::kCUDA, index);
  }
  // Simulated device `index` (>= 0): a device of its own whose memory is
  // host memory; usable once tensor/sim_device/sim_device.h installed it.
  static constexpr Device Sim(int index) {
    return Device(DeviceType::kSim, index);
  }

  constexpr DeviceType type() const { return type_; }
  // 0 for the CPU.
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::kCPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::kCUDA; }
  constexpr bool is_sim() const { return type_ == DeviceType::kSim; }
  // "cpu", "cuda:<index>" or "sim:<index>".
  std::string ToString() const;

  friend constexpr bool operator==(const Device& a, const Device& b) {
    return a.type_ == b.type_ && a.index_ == b.index_;
  }
  friend constexpr bool operator!=(const Device& a, const Device& b) {
    return !(a == b);
  }

 private:
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}

  DeviceType type_ = DeviceType::kCPU;
  int index_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_DEVICE_H_

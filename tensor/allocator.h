// Memory behind tensors: the Allocator interface, the per-device-type
// registry, and Storage (one allocation shared by every tensor viewing it).
//
// The CPU allocator is built in; tensor/sim_device/ registers one for
// DeviceType::kSim. A CUDA caching allocator plugs in later by implementing
// Allocator and registering it once at start-up:
//
//   class CudaCachingAllocator : public tandem::Allocator { ... };
//   TANDEM_RETURN_IF_ERROR(tandem::RegisterAllocator(
//       tandem::DeviceType::kCUDA, std::make_shared<CudaCachingAllocator>()));
//
// Until then, asking for CUDA memory is an error Status (FailedPrecondition),
// never a crash.
//
// Thread-safety: the registry is guarded by a mutex; RegisterAllocator and
// GetAllocator may be called from any thread. Allocator implementations
// must be thread-safe (ranks simulated as threads allocate concurrently).
// A Storage keeps its allocator alive until the memory is returned, so
// replacing a registered allocator never strands live memory.
#ifndef TANDEM_TENSOR_ALLOCATOR_H_
#define TANDEM_TENSOR_ALLOCATOR_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/device.h"

namespace tandem {

class Allocator {
 public:
  virtual ~Allocator() = default;

  // Returns `nbytes` (>= 0) of uninitialised memory on `device`, aligned to
  // at least 64 bytes, or an error (e.g. ResourceExhausted). nbytes == 0 may
  // return nullptr.
  virtual absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) = 0;
  // Returns memory obtained from Allocate(device, nbytes) on this allocator.
  virtual void Deallocate(Device device, void* ptr, int64_t nbytes) = 0;
  // Copies `nbytes` between two buffers, at least one of which belongs to
  // this allocator's device type. Blocks until the copy is complete. The
  // default says the transfer is not supported.
  virtual absl::Status CopyBytes(void* dst, Device dst_device, const void* src,
                                 Device src_device, int64_t nbytes);
};

// The built-in host allocator (aligned_alloc/free). Never null.
std::shared_ptr<Allocator> CpuAllocator();

// Installs `allocator` for every device of `type`, replacing any previous
// one. kCPU may be replaced too (e.g. by a pinned-memory allocator).
// InvalidArgument if `allocator` is null.
absl::Status RegisterAllocator(DeviceType type,
                               std::shared_ptr<Allocator> allocator);

// The allocator registered for `device`'s type; FailedPrecondition naming
// the device when none is (e.g. CUDA in a build without CUDA support).
absl::StatusOr<std::shared_ptr<Allocator>> GetAllocator(Device device);

// One allocation. Owned through shared_ptr by every tensor that views it;
// returned to its allocator when the last owner goes away. Not copyable.
class Storage {
 public:
  // Allocates `nbytes` (uninitialised) on `device`.
  static absl::StatusOr<std::shared_ptr<Storage>> Allocate(Device device,
                                                           int64_t nbytes);
  // A Storage that views all of `base`'s memory but reports `device`, for
  // device libraries whose memory is host memory
  // (tensor/sim_device/sim_device.h runs the CPU kernels on a simulated
  // device's memory through such aliases). The alias keeps the base alive; when
  // the alias goes away it calls allocator->Deallocate(device, data, nbytes),
  // which must NOT free the memory (the base does that): it is the allocator's
  // notice that this view ended (e.g. for memory accounting). Never null.
  static std::shared_ptr<Storage> Alias(std::shared_ptr<Storage> base,
                                        Device device,
                                        std::shared_ptr<Allocator> allocator);
  // Zero bytes on `device` without asking any allocator (allocator() is
  // null, data() is null): the storage of metadata-only tensors, such as
  // the graph edges autograd keeps for non-leaf inputs. Never null.
  static std::shared_ptr<Storage> Empty(Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  const std::shared_ptr<Allocator>& allocator() const { return allocator_; }
  // The storage this one aliases (see Alias); null for an allocation.
  const std::shared_ptr<Storage>& base() const { return base_; }

  // Returning the memory while the storage lives on, and getting it back:
  // PyTorch FSDP's storage.resize_(0) / resize_(n). Sharded wrappers free a
  // layer's gathered parameters between its forward and its backward while
  // autograd's saved tensors keep pointing at this Storage; Reallocate
  // gives every tensor viewing it memory again, at the same offsets.
  //   - Free: returns the memory to the allocator (no-op when already
  //     free). Until Reallocate, data() is null and the tensors viewing the
  //     storage must not be read or written (their raw_data() is null).
  //   - Reallocate: new, uninitialised memory of nbytes() (no-op when
  //     allocated); the allocator's error on failure (the storage stays
  //     free).
  // Not thread-safe: the owner of the tensors calls them, outside any op.
  void Free();
  absl::Status Reallocate();
  bool is_allocated() const { return data_ != nullptr || nbytes_ == 0; }

 private:
  Storage(std::shared_ptr<Allocator> allocator, Device device, void* data,
          int64_t nbytes)
      : allocator_(std::move(allocator)),
        device_(device),
        data_(data),
        nbytes_(nbytes) {}

  std::shared_ptr<Allocator> allocator_;
  Device device_;
  void* data_;
  int64_t nbytes_;
  std::shared_ptr<Storage> base_;  // set by Alias only
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_ALLOCATOR_H_

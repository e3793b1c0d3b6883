#include "tensor/nn/wrapper.h"

#include <memory>
#include <string>
#include <utility>

#include "base/status_macros.h"

namespace tandem::nn {

absl::StatusOr<std::unique_ptr<Wrapper>> Wrapper::Create(
    std::string type_name, std::string child_name,
    std::unique_ptr<Module> child) {
  auto wrapper = std::unique_ptr<Wrapper>(new Wrapper(std::move(type_name)));
  TANDEM_ASSIGN_OR_RETURN(
      wrapper->child_,
      wrapper->RegisterModule(std::move(child_name), std::move(child)));
  return wrapper;
}

}  // namespace tandem::nn

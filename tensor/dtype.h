// Element types of a tandem Tensor: base/dtype.h's DType (one enum for
// tensor and comm, one numbering, one name table), re-exported here so that
// tensor code keeps including "tensor/dtype.h". See base/dtype.h for the
// members, Half, BFloat16, DTypeSize, DTypeName, IsFloatingPoint, DTypeOf.
#ifndef TANDEM_TENSOR_DTYPE_H_
#define TANDEM_TENSOR_DTYPE_H_

#include "base/dtype.h"  // IWYU pragma: export

#endif  // TANDEM_TENSOR_DTYPE_H_

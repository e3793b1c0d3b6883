// Python's repr of a float, for the modules' ExtraRepr (PyTorch prints
// eps=1e-05, momentum=0.1): the shortest digits that read back as the same
// double, in exponent form when the exponent is below -4 or above 15, and
// with ".0" on whole numbers. "inf", "-inf", "nan" as Python.
#ifndef TANDEM_TENSOR_NN_PY_REPR_H_
#define TANDEM_TENSOR_NN_PY_REPR_H_

#include <string>

namespace tandem::nn {

std::string PyFloatRepr(double value);

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_PY_REPR_H_

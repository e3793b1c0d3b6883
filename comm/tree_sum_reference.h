// The canonical tree sum written out as its definition says, one element
// at a time (testonly): the reference that comm::ReduceInto's kTreeSum and
// comm/ordered's collectives are checked against.
//   T(lo, hi) = leaves[lo][i]                     when hi - lo == 1
//             = T(lo, mid) + T(mid, hi),  mid = lo + (hi - lo) / 2
#ifndef TANDEM_COMM_TREE_SUM_REFERENCE_H_
#define TANDEM_COMM_TREE_SUM_REFERENCE_H_

#include <cstdint>
#include <vector>

namespace tandem::comm {

template <typename T>
T TreeSumReference(const std::vector<std::vector<T>>& leaves, int64_t lo,
                   int64_t hi, int64_t i) {
  if (hi - lo == 1) return leaves[lo][i];
  const int64_t mid = lo + (hi - lo) / 2;
  return TreeSumReference(leaves, lo, mid, i) +
         TreeSumReference(leaves, mid, hi, i);
}

}  // namespace tandem::comm

#endif  // TANDEM_COMM_TREE_SUM_REFERENCE_H_

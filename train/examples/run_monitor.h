// deprecated: use train/loop/run_monitor.h (the monitor moved beside the
// training loop that reports to it).
#ifndef TANDEM_TRAIN_EXAMPLES_RUN_MONITOR_H_
#define TANDEM_TRAIN_EXAMPLES_RUN_MONITOR_H_
#include "train/loop/run_monitor.h"  // IWYU pragma: export
#endif                               // TANDEM_TRAIN_EXAMPLES_RUN_MONITOR_H_

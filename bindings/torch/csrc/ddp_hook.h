// The C++ half of arcreduce.torch's DistributedDataParallel communication hook
// (arcreduce/torch/ddp.py): one DDP bucket becomes one allreduce per parameter, each a view of
// the bucket's flat buffer with the parameter's own shape, and the torch Future that DDP waits on
// is completed by the runtime's completion callback of the bucket's last op.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace arcreduce_torch {

// Adds bucket_allreduce_async to the extension module.
void add_ddp_hook(pybind11::module_& m);

}  // namespace arcreduce_torch

// The torch.profiler integration of "tpu" (profiler.cpp): registered at load time.
#pragma once

namespace torch_tpu::python {

// Whether device commands show up in torch.profiler (the extension was built with Kineto).
bool profiler_available();

}  // namespace torch_tpu::python

"""What the OpenCL and CUDA backends share, device-agnostic and importable without either runtime:
the step type and plan-time checks (step), activation codes and the device source of ``activate``
(activations), convolution and pooling geometry (conv, pool), shape views, Concat, Split and
Transpose plans (views), and the support rules of the dense, elementwise and normalisation ops.

kernels/opencl and kernels/cuda import from here and from themselves, never from each other."""

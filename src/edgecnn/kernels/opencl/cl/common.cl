/* Shared by every edgecnn OpenCL kernel. The program is this file, then the ACT_* codes, ``activate``
 * and one act_<name> kernel per activation (generated from edgecnn.kernels.gpu.activations by
 * runtime.program_source), then the other sources. */

/* Overflow-free logistic function. */
float sigmoid_of(const float v) {
    const float e = exp(-fabs(v));
    return v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

/* y = activation(x) elementwise, one kernel per activation: a kind chosen at run time would be a
 * branch in every work item, which keeps PoCL from vectorising across work items. */
#define ACTIVATION_KERNEL(name, kind)                                                                  \
    __kernel void name(__global const float *x, __global float *y, const float slope, const float low, \
                       const float high) {                                                             \
        const int i = get_global_id(0);                                                                \
        y[i] = activate(x[i], kind, slope, low, high);                                                 \
    }

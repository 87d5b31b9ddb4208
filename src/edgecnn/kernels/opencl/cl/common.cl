/* Shared by every edgecnn OpenCL kernel: activation codes and their formulas.
 * Codes follow edgecnn.ops.fused.ACTIVATIONS, then tanh. NaN propagates as in the numpy reference. */

#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_LEAKY_RELU 2
#define ACT_CLIP 3
#define ACT_SIGMOID 4
#define ACT_HARD_SWISH 5
#define ACT_SILU 6
#define ACT_TANH 7

/* Overflow-free logistic function. */
float sigmoid_of(const float v) {
    const float e = exp(-fabs(v));
    return v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

float activate(const float v, const int kind, const float slope, const float low, const float high) {
    switch (kind) {
    case ACT_RELU:
        return v < 0.0f ? 0.0f : v;
    case ACT_LEAKY_RELU:
        return v >= 0.0f ? v : v * slope;
    case ACT_CLIP: {
        const float t = v < low ? low : v; /* max then min, as Clip defines it (low > high gives high) */
        return t > high ? high : t;
    }
    case ACT_SIGMOID:
        return sigmoid_of(v);
    case ACT_HARD_SWISH:
        return v * clamp(v / 6.0f + 0.5f, 0.0f, 1.0f);
    case ACT_SILU:
        return v * sigmoid_of(v);
    case ACT_TANH:
        return tanh(v);
    default:
        return v;
    }
}

/* y = activation(x) elementwise, one kernel per activation: a kind chosen at run time would be a
 * branch in every work item, which keeps PoCL from vectorising across work items (5-10x slower). */
#define ACTIVATION_KERNEL(name, kind)                                                                  \
    __kernel void name(__global const float *x, __global float *y, const float slope, const float low, \
                       const float high) {                                                             \
        const int i = get_global_id(0);                                                                \
        y[i] = activate(x[i], kind, slope, low, high);                                                 \
    }

ACTIVATION_KERNEL(act_relu, ACT_RELU)
ACTIVATION_KERNEL(act_leaky_relu, ACT_LEAKY_RELU)
ACTIVATION_KERNEL(act_clip, ACT_CLIP)
ACTIVATION_KERNEL(act_sigmoid, ACT_SIGMOID)
ACTIVATION_KERNEL(act_hard_swish, ACT_HARD_SWISH)
ACTIVATION_KERNEL(act_silu, ACT_SILU)
ACTIVATION_KERNEL(act_tanh, ACT_TANH)

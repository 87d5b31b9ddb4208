"""CUDA C of the kernels CuPy has no routine for (im2col, direct/depthwise convolution, pooling, LRN),
of the fused epilogues, and of copies (Concat, Split, Transpose, global pools) that cost one launch
where CuPy's routines cost several host calls; compiled once per device with NVRTC (cupy.RawModule).

Kept in a Python string rather than a .cu file so that the package needs no extra package-data.
Every kernel is 1-D: ``total`` threads (one per output element, or per plane for global_pool),
each returning past ``total``.
Activation codes and formulas are kernels.gpu.activations' (shared with the OpenCL backend)."""

from edgecnn.kernels.gpu.activations import activate_source

PRELUDE = r"""
/* NVRTC has no math.h: -infinity from its bits. */
#define NEG_INF __int_as_float(0xff800000)

/* Overflow-free logistic function. */
__device__ float sigmoid_of(const float v) {
    const float e = expf(-fabsf(v));
    return v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}
"""

KERNEL_SOURCE = r"""
#define GID_OR_RETURN                                            \
    const int gid = blockIdx.x * blockDim.x + threadIdx.x;       \
    if (gid >= total) return;

extern "C" {

/* y = act(x) elementwise (x may be y). */
__global__ void activation(const int total, const float *x, float *y, const int kind, const float slope,
                           const float low, const float high) {
    GID_OR_RETURN
    y[gid] = activate(x[gid], kind, slope, low, high);
}

/* In place over (batches, rows, plane) outputs: y = act(y + bias[row]); bias may be absent. */
__global__ void bias_activation(const int total, float *y, const float *bias, const int has_bias,
                                const int rows, const int plane, const int kind, const float slope,
                                const float low, const float high) {
    GID_OR_RETURN
    float v = y[gid];
    if (has_bias) v += bias[(gid / plane) % rows];
    y[gid] = activate(v, kind, slope, low, high);
}

#define CONV_GEOMETRY                                                                                  \
    const int C, const int H, const int W, const int G, const int KH, const int KW, const int SH,     \
        const int SW, const int PH, const int PW, const int DH, const int DW, const int OH, const int OW

/* cols[b][k][p] for b = (n - n0) * G + g, k = (c * KH + ki) * KW + kj over the group's C / G channels,
 * p = oh * OW + ow; zero where the window reads padding. A batch of (Kc x P) matrices for cuBLAS. */
__global__ void im2col(const int total, const float *x, CONV_GEOMETRY, const int n0, float *cols) {
    GID_OR_RETURN
    const int P = OH * OW, Cg = C / G, Kc = Cg * KH * KW;
    const int p = gid % P;
    const int k = (gid / P) % Kc;
    const int b = gid / P / Kc;
    const int kj = k % KW, ki = (k / KW) % KH, c = k / KW / KH;
    const int g = b % G, n = n0 + b / G;
    const int ih = (p / OW) * SH - PH + ki * DH;
    const int iw = (p % OW) * SW - PW + kj * DW;
    float v = 0.0f;
    if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = x[((n * C + g * Cg + c) * H + ih) * W + iw];
    cols[gid] = v;
}

/* Depthwise and narrow grouped convolutions: one thread per output, gid = ((n * M + m) * OH + oh) * OW + ow. */
__global__ void conv_direct(const int total, const float *x, CONV_GEOMETRY, const float *w, const int M,
                            const float *bias, const int has_bias, float *y, const int kind,
                            const float slope, const float low, const float high) {
    GID_OR_RETURN
    const int ow = gid % OW, oh = (gid / OW) % OH, m = (gid / OW / OH) % M, n = gid / OW / OH / M;
    const int Cg = C / G, g = m / (M / G);
    const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    const float *xg = x + (size_t)(n * C + g * Cg) * H * W;
    const float *wm = w + m * Cg * KH * KW;
    float acc = 0.0f;
    for (int c = 0; c < Cg; ++c) {
        for (int ki = 0; ki < KH; ++ki) {
            const int ih = ih0 + ki * DH;
            if (ih < 0 || ih >= H) continue;
            const float *row = xg + (c * H + ih) * W;
            const float *wrow = wm + (c * KH + ki) * KW;
            for (int kj = 0; kj < KW; ++kj) {
                const int iw = iw0 + kj * DW;
                if (iw >= 0 && iw < W) acc += row[iw] * __ldg(wrow + kj);
            }
        }
    }
    if (has_bias) acc += bias[m];
    y[gid] = activate(acc, kind, slope, low, high);
}

/* The larger of v and best, NaN if v is NaN (once best is NaN it stays). */
__device__ float max_nan(const float v, const float best) { return (v > best || isnan(v)) ? v : best; }

#define POOL_GEOMETRY                                                                                  \
    const int H, const int W, const int OH, const int OW, const int KH, const int KW, const int SH,   \
        const int SW, const int PH, const int PW, const int DH, const int DW

/* (planes, H, W) -> (planes, OH, OW); windows clipped to the input (= padding with -inf). */
__global__ void max_pool2d(const int total, const float *x, float *y, POOL_GEOMETRY) {
    GID_OR_RETURN
    const int ow = gid % OW, oh = (gid / OW) % OH, plane = gid / OW / OH;
    const float *xp = x + (size_t)plane * H * W;
    const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    float best = NEG_INF;
    for (int ki = 0; ki < KH; ++ki) {
        const int ih = ih0 + ki * DH;
        if (ih < 0 || ih >= H) continue;
        for (int kj = 0; kj < KW; ++kj) {
            const int iw = iw0 + kj * DW;
            if (iw >= 0 && iw < W) best = max_nan(xp[ih * W + iw], best);
        }
    }
    y[gid] = best;
}

/* Window positions along one axis that fall in [lo, hi). */
__device__ int window_count(const int start, const int k, const int d, const int lo, const int hi) {
    int count = 0;
    for (int t = 0; t < k; ++t) {
        const int at = start + t * d;
        count += (at >= lo && at < hi) ? 1 : 0;
    }
    return count;
}

/* PHE, PWE: the explicit end pads; with count_include_pad the divisor counts positions in
 * [-PH, H + PHE) (never the extra ones ceil_mode adds), else only those inside the input. */
__global__ void avg_pool2d(const int total, const float *x, float *y, POOL_GEOMETRY, const int PHE,
                           const int PWE, const int count_include_pad) {
    GID_OR_RETURN
    const int ow = gid % OW, oh = (gid / OW) % OH, plane = gid / OW / OH;
    const float *xp = x + (size_t)plane * H * W;
    const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    float sum = 0.0f;
    for (int ki = 0; ki < KH; ++ki) {
        const int ih = ih0 + ki * DH;
        if (ih < 0 || ih >= H) continue;
        for (int kj = 0; kj < KW; ++kj) {
            const int iw = iw0 + kj * DW;
            if (iw >= 0 && iw < W) sum += xp[ih * W + iw];
        }
    }
    const int rows = count_include_pad ? window_count(ih0, KH, DH, -PH, H + PHE) : window_count(ih0, KH, DH, 0, H);
    const int cols = count_include_pad ? window_count(iw0, KW, DW, -PW, W + PWE) : window_count(iw0, KW, DW, 0, W);
    y[gid] = sum / (float)(rows * cols);
}

/* x, y: (N, C, S); y = x / (bias + alpha / size * sum of x^2 over channels [c - before, c + after]) ^ beta. */
__global__ void lrn(const int total, const float *x, float *y, const int C, const int S, const int size,
                    const float alpha, const float beta, const float bias) {
    GID_OR_RETURN
    const int s = gid % S, c = (gid / S) % C, n = gid / S / C;
    const int before = (size - 1) / 2, after = size - 1 - before;
    const int lo = max(c - before, 0), hi = min(c + after, C - 1);
    const float *xn = x + (size_t)n * C * S + s;
    float sum = 0.0f;
    for (int k = lo; k <= hi; ++k) sum += xn[k * S] * xn[k * S];
    y[gid] = x[gid] / powf(bias + alpha / (float)size * sum, beta);
}

/* Mean (is_max = 0) or maximum of each plane of S elements, one thread per plane. */
__global__ void global_pool(const int total, const float *x, float *y, const int S, const int is_max) {
    GID_OR_RETURN
    const float *xp = x + (long long)gid * S;
    if (is_max) {
        float best = NEG_INF;
        for (int s = 0; s < S; ++s) best = max_nan(xp[s], best);
        y[gid] = best;
    } else {
        float sum = 0.0f;
        for (int s = 0; s < S; ++s) sum += xp[s];
        y[gid] = sum / (float)S;
    }
}

/* One input of a Concat: rows of x_row elements into rows of y_row, from column y_start. */
__global__ void copy_rows(const int total, const float *x, float *y, const int x_row, const int y_row,
                          const int y_start) {
    GID_OR_RETURN
    y[(gid / x_row) * y_row + y_start + gid % x_row] = x[gid];
}

/* One output of a Split: rows of y_row elements out of rows of x_row, from column x_start. */
__global__ void copy_rows_from(const int total, const float *x, float *y, const int x_row, const int y_row,
                               const int x_start) {
    GID_OR_RETURN
    y[gid] = x[(gid / y_row) * x_row + x_start + gid % y_row];
}

/* Transpose: meta holds the output dims, then the input stride of each output axis. */
__global__ void permute(const int total, const float *x, float *y, const int *meta, const int rank) {
    GID_OR_RETURN
    int rest = gid, at = 0;
    for (int d = rank - 1; d >= 0; --d) {
        at += (rest % meta[d]) * meta[rank + d];
        rest /= meta[d];
    }
    y[gid] = x[at];
}

}  /* extern "C" */
"""

KERNELS = (
    "activation", "bias_activation", "im2col", "conv_direct", "max_pool2d", "avg_pool2d", "lrn", "global_pool",
    "copy_rows", "copy_rows_from", "permute",
)  # fmt: skip
"""The kernels of SOURCE, looked up by name."""

SOURCE = PRELUDE + activate_source("__device__") + KERNEL_SOURCE
"""The module NVRTC compiles: the prelude, ``activate`` (kernels.gpu.activations), the kernels."""

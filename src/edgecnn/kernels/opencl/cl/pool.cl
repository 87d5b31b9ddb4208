/* 2-D pooling over (planes = N * C, H, W) -> (planes, OH, OW), one work item per output
 * (seed 001, algorithm 3.5); windows are clipped to the input, which equals padding with -inf (max)
 * or with zeros that the divisor leaves out (average, unless count_include_pad). */

/* The larger of v and best, NaN if v is NaN (once best is NaN it stays: NaN > x is false). */
float max_nan(const float v, const float best) { return (v > best || isnan(v)) ? v : best; }

#define POOL_GEOMETRY                                                                                    \
    const int H, const int W, const int OH, const int OW, const int KH, const int KW, const int SH,     \
        const int SW, const int PH, const int PW, const int DH, const int DW

__kernel void max_pool2d(__global const float *x, __global float *y, POOL_GEOMETRY) {
    const int gid = get_global_id(0);
    const int ow = gid % OW, oh = (gid / OW) % OH, plane = gid / OW / OH;
    const __global float *xp = x + plane * H * W;
    const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    float best = -INFINITY;
    for (int ki = 0; ki < KH; ++ki) {
        const int ih = ih0 + ki * DH;
        if (ih < 0 || ih >= H) continue;
        for (int kj = 0; kj < KW; ++kj) {
            const int iw = iw0 + kj * DW;
            if (iw >= 0 && iw < W) {
                best = max_nan(xp[ih * W + iw], best);
            }
        }
    }
    y[gid] = best;
}

/* Window positions along one axis that fall in [lo, hi). */
int window_count(const int start, const int k, const int d, const int lo, const int hi) {
    int count = 0;
    for (int t = 0; t < k; ++t) {
        const int at = start + t * d;
        count += (at >= lo && at < hi) ? 1 : 0;
    }
    return count;
}

/* PHE, PWE: the explicit end pads; with count_include_pad the divisor counts positions in
 * [-PH, H + PHE) (never the extra ones ceil_mode adds), else only those inside the input. */
__kernel void avg_pool2d(__global const float *x, __global float *y, POOL_GEOMETRY, const int PHE,
                         const int PWE, const int count_include_pad) {
    const int gid = get_global_id(0);
    const int ow = gid % OW, oh = (gid / OW) % OH, plane = gid / OW / OH;
    const __global float *xp = x + plane * H * W;
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

/* Mean (is_max = 0) or maximum of each plane of S elements. */
__kernel void global_pool(__global const float *x, __global float *y, const int S, const int is_max) {
    const int plane = get_global_id(0);
    const __global float *xp = x + plane * S;
    if (is_max) {
        float best = -INFINITY;
        for (int s = 0; s < S; ++s) best = max_nan(xp[s], best);
        y[plane] = best;
    } else {
        float sum = 0.0f;
        for (int s = 0; s < S; ++s) sum += xp[s];
        y[plane] = sum / (float)S;
    }
}

/* Pooling for CPU devices: one work item per output row (plane, oh), accumulating each window tap
 * over the row's valid columns (see im2col_rows in conv.cl for why). valid_columns is in conv.cl. */
__kernel void max_pool2d_rows(__global const float *restrict x, __global float *restrict y, POOL_GEOMETRY) {
    const int gid = get_global_id(0);
    const int oh = gid % OH, plane = gid / OH;
    const __global float *xp = x + plane * H * W;
    __global float *out = y + gid * OW;
    for (int ow = 0; ow < OW; ++ow) out[ow] = -INFINITY;
    for (int ki = 0; ki < KH; ++ki) {
        const int ih = oh * SH - PH + ki * DH;
        if (ih < 0 || ih >= H) continue;
        const __global float *row = xp + ih * W;
        for (int kj = 0; kj < KW; ++kj) {
            const int iw0 = kj * DW - PW;
            const int2 valid = valid_columns(iw0, SW, W, OW);
            if (SW == 1) { /* contiguous: the compiler vectorises this loop */
                const __global float *src = row + iw0;
                for (int ow = valid.x; ow < valid.y; ++ow) out[ow] = max_nan(src[ow], out[ow]);
            } else {
                for (int ow = valid.x; ow < valid.y; ++ow) out[ow] = max_nan(row[iw0 + ow * SW], out[ow]);
            }
        }
    }
}

__kernel void avg_pool2d_rows(__global const float *restrict x, __global float *restrict y, POOL_GEOMETRY, const int PHE,
                              const int PWE, const int count_include_pad) {
    const int gid = get_global_id(0);
    const int oh = gid % OH, plane = gid / OH;
    const __global float *xp = x + plane * H * W;
    __global float *out = y + gid * OW;
    for (int ow = 0; ow < OW; ++ow) out[ow] = 0.0f;
    const int ih0 = oh * SH - PH;
    for (int ki = 0; ki < KH; ++ki) {
        const int ih = ih0 + ki * DH;
        if (ih < 0 || ih >= H) continue;
        const __global float *row = xp + ih * W;
        for (int kj = 0; kj < KW; ++kj) {
            const int iw0 = kj * DW - PW;
            const int2 valid = valid_columns(iw0, SW, W, OW);
            if (SW == 1) {
                const __global float *src = row + iw0;
                for (int ow = valid.x; ow < valid.y; ++ow) out[ow] += src[ow];
            } else {
                for (int ow = valid.x; ow < valid.y; ++ow) out[ow] += row[iw0 + ow * SW];
            }
        }
    }
    const int rows = count_include_pad ? window_count(ih0, KH, DH, -PH, H + PHE) : window_count(ih0, KH, DH, 0, H);
    for (int ow = 0; ow < OW; ++ow) {
        const int iw0 = ow * SW - PW;
        const int cols = count_include_pad ? window_count(iw0, KW, DW, -PW, W + PWE) : window_count(iw0, KW, DW, 0, W);
        out[ow] /= (float)(rows * cols);
    }
}

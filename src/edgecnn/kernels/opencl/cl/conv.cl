/* 2-D convolution: im2col (seed 001, algorithm 3.4) feeding the GEMM kernels, and a direct kernel for
 * depthwise and other grouped convolutions where the column matrix would be mostly copies.
 * Input x is (N, C, H, W); weights (M, C / G, KH, KW); output (N, M, OH, OW). */

#define CONV_GEOMETRY                                                                                    \
    const int C, const int H, const int W, const int G, const int KH, const int KW, const int SH,       \
        const int SW, const int PH, const int PW, const int DH, const int DW, const int OH, const int OW

/* cols[b][k][p] at b * b_stride + k * k_stride + p * p_stride, for b = (n - n0) * G + g, k = (c * KH + ki) * KW + kj
 * over the group's Cg = C / G channels and p = oh * OW + ow; zero where the window reads padding.
 * (k_stride, p_stride) = (P, 1) gives K x P columns, (1, Kc) their transpose (contiguous along k). */
__kernel void im2col(__global const float *x, CONV_GEOMETRY, const int n0, __global float *cols,
                     const int k_stride, const int p_stride, const int b_stride) {
    const int gid = get_global_id(0);
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
    cols[b * b_stride + k * k_stride + p * p_stride] = v;
}

/* One work item per output element, gid = ((n * M + m) * OH + oh) * OW + ow. */
__kernel void conv_direct(__global const float *x, CONV_GEOMETRY, __global const float *w, const int M,
                          __global const float *bias, const int has_bias, __global float *y, const int act,
                          const float slope, const float low, const float high) {
    const int gid = get_global_id(0);
    const int ow = gid % OW, oh = (gid / OW) % OH, m = (gid / OW / OH) % M, n = gid / OW / OH / M;
    const int Cg = C / G, g = m / (M / G);
    const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    const __global float *xg = x + (n * C + g * Cg) * H * W;
    const __global float *wm = w + m * Cg * KH * KW;
    float acc = 0.0f;
    for (int c = 0; c < Cg; ++c) {
        for (int ki = 0; ki < KH; ++ki) {
            const int ih = ih0 + ki * DH;
            if (ih < 0 || ih >= H) continue;
            const __global float *row = xg + (c * H + ih) * W;
            const __global float *wrow = wm + (c * KH + ki) * KW;
            for (int kj = 0; kj < KW; ++kj) {
                const int iw = iw0 + kj * DW;
                if (iw >= 0 && iw < W) acc += row[iw] * wrow[kj];
            }
        }
    }
    if (has_bias) acc += bias[m];
    y[gid] = activate(acc, act, slope, low, high);
}

/* First and one-past-last output column whose input column iw0 + ow * S lies in [0, W): the columns
 * outside read padding. */
int2 valid_columns(const int iw0, const int S, const int W, const int OW) {
    const int lo = iw0 >= 0 ? 0 : min(OW, (-iw0 + S - 1) / S);
    const int hi = iw0 >= W ? lo : max(lo, min(OW, (W - 1 - iw0) / S + 1));
    return (int2)(lo, hi);
}

/* im2col for CPU devices (seed 001, algorithm 3.4, row by row): one work item per (b, k, oh) writes
 * OW columns, zeroing the padded parts without a test per element; much faster on CPU devices than
 * one work item per element, whose neighbours' stores the compiler cannot prove contiguous. Rows are
 * contiguous (p_stride = 1). */
__kernel void im2col_rows(__global const float *restrict x, CONV_GEOMETRY, const int n0, __global float *restrict cols,
                          const int k_stride, const int b_stride) {
    const int gid = get_global_id(0);
    const int Cg = C / G, Kc = Cg * KH * KW;
    const int oh = gid % OH, k = (gid / OH) % Kc, b = gid / OH / Kc;
    const int kj = k % KW, ki = (k / KW) % KH, c = k / KW / KH;
    const int g = b % G, n = n0 + b / G;
    __global float *out = cols + b * b_stride + k * k_stride + oh * OW;
    const int ih = oh * SH - PH + ki * DH;
    if (ih < 0 || ih >= H) {
        for (int ow = 0; ow < OW; ++ow) out[ow] = 0.0f;
        return;
    }
    const __global float *row = x + ((n * C + g * Cg + c) * H + ih) * W;
    const int iw0 = kj * DW - PW;
    const int2 valid = valid_columns(iw0, SW, W, OW);
    for (int ow = 0; ow < valid.x; ++ow) out[ow] = 0.0f;
    if (SW == 1) {
        const __global float *src = row + iw0;
        for (int ow = valid.x; ow < valid.y; ++ow) out[ow] = src[ow];
    } else {
        for (int ow = valid.x; ow < valid.y; ++ow) out[ow] = row[iw0 + ow * SW];
    }
    for (int ow = valid.y; ow < OW; ++ow) out[ow] = 0.0f;
}

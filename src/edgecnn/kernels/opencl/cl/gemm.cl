/* Batched GEMM with a fused epilogue, in the three forms of seed 001 (chapter 3.1.1): scalar,
 * float4-vectorised (vload4 + dot) and tiled through local memory.
 *
 *   Y[b] (M x N, row-major at y_off + b*M*N) = act(alpha * A[b] @ B[b] + beta * bias[b])
 *
 * Operand element (r, c) of batch b lives at X[x_off + (b % x_bmod) * x_bs + r * x_rs + c * x_cs], so one
 * kernel serves transposed operands, broadcast batches (x_bs = 0), conv groups (bmod = groups) and
 * every broadcast of Gemm's C (zero strides). */

#define GEMM_ARGS                                                                                        \
    const int M, const int N, const int K, __global const float *A, const int a_off, const int a_rs,      \
        const int a_cs, const int a_bmod, const int a_bs, __global const float *B, const int b_off,       \
        const int b_rs, const int b_cs, const int b_bmod, const int b_bs, __global const float *bias,     \
        const int has_bias, const int c_rs, const int c_cs, const int c_bmod, const int c_bs,             \
        __global float *Y, const int y_off, const float alpha, const float beta, const int act,           \
        const float slope, const float low, const float high

#define GEMM_FINISH(acc, i, j, b)                                                                        \
    activate(alpha * (acc) + (has_bias ? beta * bias[((b) % c_bmod) * c_bs + (i) * c_rs + (j) * c_cs]    \
                                       : 0.0f),                                                          \
             act, slope, low, high)

/* One work item per output element; work item gid = (b * M + i) * N + j. */
__kernel void gemm_scalar(GEMM_ARGS) {
    const int gid = get_global_id(0);
    const int j = gid % N;
    const int i = (gid / N) % M;
    const int b = gid / N / M;
    const __global float *a = A + a_off + (b % a_bmod) * a_bs + i * a_rs;
    const __global float *bb = B + b_off + (b % b_bmod) * b_bs + j * b_cs;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += a[k * a_cs] * bb[k * b_rs];
    Y[y_off + gid] = GEMM_FINISH(acc, i, j, b);
}

/* As gemm_scalar, four products per step with dot(): vload4 where the operand is contiguous along k,
 * else four loads gathered into a float4 (the seed's right-hand matrix); the tail runs scalar. */
__kernel void gemm_vec4(GEMM_ARGS) {
    const int gid = get_global_id(0);
    const int j = gid % N;
    const int i = (gid / N) % M;
    const int b = gid / N / M;
    const __global float *a = A + a_off + (b % a_bmod) * a_bs + i * a_rs;
    const __global float *bb = B + b_off + (b % b_bmod) * b_bs + j * b_cs;
    const int k4 = K & ~3;
    float acc = 0.0f;
    if (a_cs == 1 && b_rs == 1) {
        for (int k = 0; k < k4; k += 4) acc += dot(vload4(0, a + k), vload4(0, bb + k));
    } else if (a_cs == 1) {
        for (int k = 0; k < k4; k += 4)
            acc += dot(vload4(0, a + k),
                       (float4)(bb[k * b_rs], bb[(k + 1) * b_rs], bb[(k + 2) * b_rs], bb[(k + 3) * b_rs]));
    } else {
        for (int k = 0; k < k4; k += 4)
            acc += dot((float4)(a[k * a_cs], a[(k + 1) * a_cs], a[(k + 2) * a_cs], a[(k + 3) * a_cs]),
                       (float4)(bb[k * b_rs], bb[(k + 1) * b_rs], bb[(k + 2) * b_rs], bb[(k + 3) * b_rs]));
    }
    for (int k = k4; k < K; ++k) acc += a[k * a_cs] * bb[k * b_rs];
    Y[y_off + gid] = GEMM_FINISH(acc, i, j, b);
}

/* TS x TS tiles of A and B staged in local memory; each work item accumulates WPT outputs of one row,
 * WPT columns apart (work-group TS/WPT x TS covers a TS x TS block of Y). Global size: (ceil(N/TS) * TS/WPT,
 * ceil(M/TS) * TS, batches). */
__kernel __attribute__((reqd_work_group_size(TS / WPT, TS, 1))) void gemm_tiled(GEMM_ARGS) {
    const int lj = get_local_id(0), li = get_local_id(1);
    const int j0 = get_group_id(0) * TS, i = get_group_id(1) * TS + li;
    const int b = get_global_id(2);
    const __global float *a = A + a_off + (b % a_bmod) * a_bs;
    const __global float *bb = B + b_off + (b % b_bmod) * b_bs;
    __local float a_tile[TS][TS];
    __local float b_tile[TS][TS + 1];
    float acc[WPT];
    for (int w = 0; w < WPT; ++w) acc[w] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        for (int w = 0; w < WPT; ++w) {
            const int t = lj + w * (TS / WPT);
            const int ka = k0 + t, kb = k0 + li, j = j0 + t;
            a_tile[li][t] = (i < M && ka < K) ? a[i * a_rs + ka * a_cs] : 0.0f;
            b_tile[li][t] = (kb < K && j < N) ? bb[kb * b_rs + j * b_cs] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TS; ++kk) {
            const float av = a_tile[li][kk];
            for (int w = 0; w < WPT; ++w) acc[w] += av * b_tile[kk][lj + w * (TS / WPT)];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i >= M) return;
    for (int w = 0; w < WPT; ++w) {
        const int j = j0 + lj + w * (TS / WPT);
        if (j < N) Y[y_off + (b * M + i) * N + j] = GEMM_FINISH(acc[w], i, j, b);
    }
}

/* Register-blocked: each work item computes a 4 x 8 block of Y from float8 rows of B, so every B load
 * feeds 32 multiply-adds (the scalar kernel: one). Needs A and B row-major (a_cs = b_cs = 1) and B's
 * rows readable up to a multiple of 8 columns (padded); rows of A past M are clamped, outputs past
 * M or N are not stored. Global size: (ceil(N/8), ceil(M/4), batches), rounded up to the work-group. */
__kernel void gemm_blocked(GEMM_ARGS) {
    const int j = get_global_id(0) * 8, i = get_global_id(1) * 4, b = get_global_id(2);
    if (j >= N || i >= M) return;
    const __global float *a = A + a_off + (b % a_bmod) * a_bs;
    const __global float *a0 = a + i * a_rs;
    const __global float *a1 = a + min(i + 1, M - 1) * a_rs;
    const __global float *a2 = a + min(i + 2, M - 1) * a_rs;
    const __global float *a3 = a + min(i + 3, M - 1) * a_rs;
    const __global float *bb = B + b_off + (b % b_bmod) * b_bs + j;
    float8 acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
    for (int k = 0; k < K; ++k) {
        const float8 row = vload8(0, bb + k * b_rs);
        acc0 += a0[k] * row;
        acc1 += a1[k] * row;
        acc2 += a2[k] * row;
        acc3 += a3[k] * row;
    }
    float out[4][8];
    vstore8(acc0, 0, out[0]);
    vstore8(acc1, 0, out[1]);
    vstore8(acc2, 0, out[2]);
    vstore8(acc3, 0, out[3]);
    for (int r = 0; r < 4 && i + r < M; ++r)
        for (int c = 0; c < 8 && j + c < N; ++c)
            Y[y_off + (b * M + i + r) * N + j + c] = GEMM_FINISH(out[r][c], i + r, j + c, b);
}

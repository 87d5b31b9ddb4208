/* Binary arithmetic with numpy broadcasting, and block copies (Concat). */

#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3

/* meta = dims[rank], a_strides[rank], b_strides[rank] (zero along broadcast axes), over the output's
 * axes after merging runs that broadcast alike. */
__kernel void binary(__global const float *a, __global const float *b, __global float *y, const int op,
                     __global const int *meta, const int rank) {
    const int gid = get_global_id(0);
    int rest = gid, ai = 0, bi = 0;
    for (int d = rank - 1; d >= 0; --d) {
        const int coord = rest % meta[d];
        rest /= meta[d];
        ai += coord * meta[rank + d];
        bi += coord * meta[2 * rank + d];
    }
    const float u = a[ai], v = b[bi];
    float r;
    switch (op) {
    case OP_ADD: r = u + v; break;
    case OP_SUB: r = u - v; break;
    case OP_MUL: r = u * v; break;
    default: r = u / v; break;
    }
    y[gid] = r;
}

/* y[o * y_row + y_start + r] = x[o * x_row + r] for r < x_row: one input of a Concat. */
__kernel void copy_rows(__global const float *x, __global float *y, const int x_row, const int y_row,
                        const int y_start) {
    const int gid = get_global_id(0);
    y[(gid / x_row) * y_row + y_start + gid % x_row] = x[gid];
}

/* y[r] = x[o * x_row + x_start + r % y_row] for r = o * y_row + r % y_row: one output of a Split. */
__kernel void copy_rows_from(__global const float *x, __global float *y, const int x_row, const int y_row,
                             const int x_start) {
    const int gid = get_global_id(0);
    y[gid] = x[(gid / y_row) * x_row + x_start + gid % y_row];
}

/* Transpose: meta = output dims[rank], then the input stride of each output axis. */
__kernel void permute(__global const float *x, __global float *y, __global const int *meta, const int rank) {
    const int gid = get_global_id(0);
    int rest = gid, at = 0;
    for (int d = rank - 1; d >= 0; --d) {
        at += (rest % meta[d]) * meta[rank + d];
        rest /= meta[d];
    }
    y[gid] = x[at];
}

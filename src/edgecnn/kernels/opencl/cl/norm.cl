/* Local response normalisation across channels and softmax. */

/* x, y: (N, C, S); y = x / (bias + alpha / size * sum of x^2 over channels [c - before, c + after]) ^ beta. */
__kernel void lrn(__global const float *x, __global float *y, const int C, const int S, const int size,
                  const float alpha, const float beta, const float bias) {
    const int gid = get_global_id(0);
    const int s = gid % S, c = (gid / S) % C, n = gid / S / C;
    const int before = (size - 1) / 2, after = size - 1 - before;
    const int lo = max(c - before, 0), hi = min(c + after, C - 1);
    const __global float *xn = x + n * C * S + s;
    float sum = 0.0f;
    for (int k = lo; k <= hi; ++k) sum += xn[k * S] * xn[k * S];
    y[gid] = x[gid] / pow(bias + alpha / (float)size * sum, beta);
}

/* x, y: (outer, L, inner), normalised over L; one work item per (outer, inner) pair. */
__kernel void softmax(__global const float *x, __global float *y, const int L, const int inner) {
    const int gid = get_global_id(0);
    const int base = (gid / inner) * L * inner + gid % inner;
    float top = -INFINITY;
    for (int l = 0; l < L; ++l) top = fmax(top, x[base + l * inner]);
    float sum = 0.0f;
    for (int l = 0; l < L; ++l) {
        const float e = exp(x[base + l * inner] - top);
        y[base + l * inner] = e;
        sum += e;
    }
    for (int l = 0; l < L; ++l) y[base + l * inner] /= sum;
}

/* The node loops of a data step and of the test error in C (the target map, the Stein sums and
   the test-error sum of docs/model.md (1.2), (3.3), (4.2)): the twins of the numba kernels
   jit.target_kernel, jit_stein.second_minimum_kernel, jit_stein.stein_sums_kernel and
   jit.test_loss_sum_kernel, with the same operations in the same order (attnphase.theory.native
   compiles this file on first use and calls it through ctypes). Arrays are C-contiguous float64
   (the mask uint8); every loop over nodes is cut into the same chunks as the numba kernels, each
   chunk writing its own partial sums, so the results do not depend on the threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PYMAX(a, b) ((b) > (a) ? (b) : (a))

/* T = (1 - omega) softmax(h* h*^T) + omega A at one node (causal: scores k <= l) */
static void target_rows(const double *hs, long L, long R, double omega, const double *A, int causal, double *out)
{
    for (long l = 0; l < L; l++) {
        const long kmax = causal ? l + 1 : L;
        double mx = -INFINITY;
        for (long k = 0; k < kmax; k++) {
            double s = 0.0;
            for (long a = 0; a < R; a++) s += hs[l * R + a] * hs[k * R + a];
            out[l * L + k] = s;
            mx = PYMAX(mx, s);
        }
        double tot = 0.0;
        for (long k = 0; k < kmax; k++) {
            const double e = exp(out[l * L + k] - mx);
            out[l * L + k] = e;
            tot += e;
        }
        for (long k = 0; k < L; k++) {
            const double sm = k < kmax ? out[l * L + k] / tot : 0.0;
            out[l * L + k] = (1.0 - omega) * sm + omega * A[l * L + k];
        }
    }
}

void target_kernel(long N, long L, long R, const double *hstar, double omega, const double *A, int causal,
                   double *out, int n_threads)
{
    #pragma omp parallel for schedule(static) num_threads(n_threads)
    for (long i = 0; i < N; i++) target_rows(hstar + i * L * R, L, R, omega, A, causal, out + i * L * L);
}

void second_minimum_kernel(long N, long S, long n, const double *best, const double *cand, const double *vals,
                           double distinct, double *out_h, double *out_v, int n_threads)
{
    #pragma omp parallel for schedule(static) num_threads(n_threads)
    for (long i = 0; i < N; i++) {
        long jbest = -1;
        double vbest = INFINITY;
        for (long s = 0; s < S; s++) {
            double d = 0.0;
            for (long k = 0; k < n; k++) d = PYMAX(d, fabs(cand[(i * S + s) * n + k] - best[i * n + k]));
            if (d >= distinct && vals[i * S + s] < vbest) {
                vbest = vals[i * S + s];
                jbest = s;
            }
        }
        if (jbest < 0) {
            for (long k = 0; k < n; k++) out_h[i * n + k] = best[i * n + k];
            out_v[i] = INFINITY;
        } else {
            for (long k = 0; k < n; k++) out_h[i * n + k] = cand[(i * S + jbest) * n + k];
            out_v[i] = vbest;
        }
    }
}

/* jit_stein.stein_sums_kernel: out_m (C, L, F), out_q (C, F, F), out_th (C, F, R), out_v (C, F, F), zeroed by the
   caller; C = n_chunks */
void stein_sums(long N, long L, long F, long R, const double *wt, const double *w, const double *h1,
                const double *h2, const double *M1, const double *M2, double tau, const double *Vinv,
                const double *xi, const double *eta, int mirror, const double *cm, const double *B,
                double *out_m, double *out_q, double *out_th, double *out_v, long n_chunks, int n_threads)
{
    const long size = (N + n_chunks - 1) / n_chunks;
    #pragma omp parallel for schedule(static) num_threads(n_threads)
    for (long c = 0; c < n_chunks; c++) {
        double *G = (double *)malloc(sizeof(double) * (size_t)(2 * F + 2 * L * F + 2 * L * R));
        double *X = G + 2 * F, *X2 = X + L * F, *E = X2 + L * F, *E2 = E + L * R;
        double *om = out_m + c * L * F, *oq = out_q + c * F * F, *oth = out_th + c * F * R, *ov = out_v + c * F * F;
        const long end = (c + 1) * size < N ? (c + 1) * size : N;
        for (long i = c * size; i < end; i++) {
            const double *xi_i = xi + i * L * F, *eta_i = eta + i * L * R;
            const double *w_i = w + i * L * F, *h1_i = h1 + i * L * F, *h2_i = h2 + i * L * F;
            double p = 1.0;
            if (tau > 0.0) p = 1.0 / (1.0 + exp(-(M2[i] - M1[i]) / tau));
            double fm = 1.0;
            if (mirror) {
                double lr = 0.0;
                for (long l = 0; l < L; l++) {
                    for (long b = 0; b < F; b++) {
                        X2[l * F + b] = -xi_i[l * F + b] - 2.0 * cm[l * F + b];
                        lr += xi_i[l * F + b] * xi_i[l * F + b] - X2[l * F + b] * X2[l * F + b];
                    }
                    for (long b = 0; b < R; b++) {
                        double e2 = eta_i[l * R + b];
                        for (long k = 0; k < F; k++) e2 += 2.0 * (xi_i[l * F + k] + cm[l * F + k]) * B[k * R + b];
                        E2[l * R + b] = e2;
                        lr += eta_i[l * R + b] * eta_i[l * R + b] - e2 * e2;
                    }
                }
                const double s = 0.5 * (1.0 + tanh(0.25 * lr));
                fm = 1.0 - 2.0 * s;
                for (long l = 0; l < L; l++) {
                    for (long b = 0; b < F; b++) X[l * F + b] = (1.0 - s) * xi_i[l * F + b] - s * X2[l * F + b];
                    for (long b = 0; b < R; b++) E[l * R + b] = (1.0 - s) * eta_i[l * R + b] - s * E2[l * R + b];
                }
            } else {
                for (long l = 0; l < L; l++) {
                    for (long b = 0; b < F; b++) X[l * F + b] = xi_i[l * F + b];
                    for (long b = 0; b < R; b++) E[l * R + b] = eta_i[l * R + b];
                }
            }
            const double a1 = wt[i] * p;
            const double a2 = wt[i] * (1.0 - p);
            const int nk = a2 > 0.0 ? 2 : 1;
            for (long l = 0; l < L; l++) {
                for (long b = 0; b < F; b++) {
                    double s1 = 0.0, s2 = 0.0;
                    for (long k = 0; k < F; k++) {
                        s1 += (h1_i[l * F + k] - w_i[l * F + k]) * Vinv[k * F + b];
                        s2 += (h2_i[l * F + k] - w_i[l * F + k]) * Vinv[k * F + b];
                    }
                    G[b] = s1;
                    G[F + b] = s2;
                }
                for (int k = 0; k < nk; k++) {
                    const double cw = k == 0 ? a1 : a2;
                    for (long a = 0; a < F; a++) {
                        const double u = cw * G[k * F + a];
                        om[l * F + a] += fm * u;
                        for (long b = 0; b < F; b++) {
                            oq[a * F + b] += u * G[k * F + b];
                            ov[a * F + b] += u * X[l * F + b];
                        }
                        for (long b = 0; b < R; b++) oth[a * R + b] += u * E[l * R + b];
                    }
                }
            }
        }
        free(G);
    }
}

/* S = rowsoftmax(s) at one node, s_lj = h_l . Mh_j, masked entries zero */
static void student_rows(const double *h, const double *Mh, const unsigned char *mask, long L, long F, double *P)
{
    for (long l = 0; l < L; l++) {
        double mx = -1e300;
        for (long j = 0; j < L; j++) {
            if (mask[l * L + j]) {
                double s = 0.0;
                for (long a = 0; a < F; a++) s += h[l * F + a] * Mh[j * F + a];
                P[l * L + j] = s;
                if (s > mx) mx = s;
            }
        }
        double tot = 0.0;
        for (long j = 0; j < L; j++) {
            if (mask[l * L + j]) {
                const double v = exp(P[l * L + j] - mx);
                P[l * L + j] = v;
                tot += v;
            } else {
                P[l * L + j] = 0.0;
            }
        }
        for (long j = 0; j < L; j++) P[l * L + j] /= tot;
    }
}

/* jit_maps.student_heads for softmax heads: S = sum_k gains_k softmax(s^k) row by row, s^k_lj = w_l . (M_k w_j)
   (forms (K, F, F)), masked entries 0; Mh (L x F) and p (L) are scratch */
static void student_heads_rows(const double *w, const unsigned char *mask, long K, const double *forms,
                               const double *gains, long L, long F, double *Mh, double *p, double *S)
{
    for (long l = 0; l < L; l++)
        for (long j = 0; j < L; j++) S[l * L + j] = 0.0;
    for (long k = 0; k < K; k++) {
        const double *Mk = forms + k * F * F;
        for (long j = 0; j < L; j++)
            for (long a = 0; a < F; a++) {
                double acc = 0.0;
                for (long b = 0; b < F; b++) acc += Mk[a * F + b] * w[j * F + b];
                Mh[j * F + a] = acc;
            }
        for (long l = 0; l < L; l++) {
            for (long j = 0; j < L; j++) {
                double acc = 0.0;
                for (long a = 0; a < F; a++) acc += w[l * F + a] * Mh[j * F + a];
                p[j] = acc;
            }
            double mx = -1e300;
            for (long j = 0; j < L; j++)
                if (mask[l * L + j] && p[j] > mx) mx = p[j];
            double tot = 0.0;
            for (long j = 0; j < L; j++) {
                if (mask[l * L + j]) {
                    const double v = exp(p[j] - mx);
                    p[j] = v;
                    tot += v;
                } else {
                    p[j] = 0.0;
                }
            }
            for (long j = 0; j < L; j++) S[l * L + j] += gains[k] * (p[j] / tot);
        }
    }
}

/* out_l = sum_k mix_lk u_k over the first n columns of u (row stride su) */
static void mix_rows(const double *mix, const double *u, long su, long L, long n, double *out)
{
    for (long l = 0; l < L; l++)
        for (long a = 0; a < n; a++) {
            double acc = 0.0;
            for (long k = 0; k < L; k++) acc += mix[l * L + k] * u[k * su + a];
            out[l * n + a] = acc;
        }
}

/* jit._node_test_loss: ell(w; T(h*)) at one Gaussian node x = (xi, eta); u has row stride su; K > 0 softmax heads
   (forms, gains: student_heads_rows) in place of softmax(w M w^T); p (L) is scratch */
static double node_test_loss(const double *x, const double *m, const double *qs, const double *B, const double *Rs,
                             const double *mix, const double *M, const unsigned char *mask, double omega,
                             const double *A, int causal, const double *C, long L, long F, long R,
                             double *w, double *hs, double *u, long su, double *S, double *T,
                             long K, const double *forms, const double *gains, double *p)
{
    const long nxi = L * F;
    for (long l = 0; l < L; l++)
        for (long a = 0; a < F; a++) {
            double acc = m[l * F + a];
            for (long b = 0; b < F; b++) acc += x[l * F + b] * qs[b * F + a];
            u[l * su + a] = acc;
        }
    mix_rows(mix, u, su, L, F, w);
    for (long l = 0; l < L; l++)
        for (long a = 0; a < R; a++) {
            double acc = 0.0;
            for (long b = 0; b < F; b++) acc += x[l * F + b] * B[b * R + a];
            for (long b = 0; b < R; b++) acc += x[nxi + l * R + b] * Rs[b * R + a];
            u[l * su + a] = acc;
        }
    mix_rows(mix, u, su, L, R, hs);
    if (K > 0) {
        student_heads_rows(w, mask, K, forms, gains, L, F, S + L * L, p, S);
    } else {
    /* u <- M w_j, then the two maps (the student scores read u with row stride F: copy) */
    for (long j = 0; j < L; j++)
        for (long a = 0; a < F; a++) {
            double acc = 0.0;
            for (long b = 0; b < F; b++) acc += M[a * F + b] * w[j * F + b];
            u[j * su + a] = acc;
        }
    {
        double *Mh = S + L * L;  /* (scratch after S: L x F) */
        for (long j = 0; j < L; j++)
            for (long a = 0; a < F; a++) Mh[j * F + a] = u[j * su + a];
        student_rows(w, Mh, mask, L, F, S);
    }
    }
    target_rows(hs, L, R, omega, A, causal, T);
    double out = 0.0;
    for (long l = 0; l < L; l++)
        for (long j = 0; j < L; j++) {
            const double dj = S[l * L + j] - T[l * L + j];
            for (long k = 0; k < L; k++) out += dj * C[j * L + k] * (S[l * L + k] - T[l * L + k]);
        }
    return 0.5 * out;
}

/* jit.test_loss_sum_kernel: sum_i w_i ell(x_i) over the nodes X (N x dim, weights W) or, with N = 0, over
   the product rule (t, wt)^dim decoded from the flat index (last coordinate fastest); the student's map of
   K > 0 softmax heads with the forms (K, F, F) and gains (K) of docs/model.md (11.1), or (K = 0) softmax(w M w^T) */
double test_loss_sum(long N, const double *X, const double *W, long n1, const double *t, const double *wt,
                     long L, long F, long R, const double *m, const double *qs, const double *B, const double *Rs,
                     const double *mix, const double *M, const unsigned char *mask, double omega, const double *A,
                     int causal, const double *C, long n_chunks, int n_threads, long K, const double *forms,
                     const double *gains)
{
    const long dim = L * (F + R);
    const int product = N == 0;
    long total = N;
    if (product) {
        total = 1;
        for (long d = 0; d < dim; d++) total *= n1;
    }
    const long size = (total + n_chunks - 1) / n_chunks;
    const long su = F > R ? F : R;
    double *part = (double *)calloc((size_t)n_chunks, sizeof(double));
    #pragma omp parallel for schedule(static) num_threads(n_threads)
    for (long c = 0; c < n_chunks; c++) {
        double *x = (double *)calloc((size_t)(dim + 2 * L * F + L * R + L * su + 3 * L * L + L * F + L),
                                     sizeof(double));
        double *w = x + dim, *hs = w + L * F, *u = hs + L * R, *S = u + L * su, *T = S + L * L + L * F;
        double *p = T + L * L;
        double acc = 0.0;
        const long end = (c + 1) * size < total ? (c + 1) * size : total;
        for (long i = c * size; i < end; i++) {
            double wi;
            if (product) {
                long idx = i;
                wi = 1.0;
                for (long d = dim - 1; d >= 0; d--) {
                    const long k = idx % n1;
                    idx /= n1;
                    x[d] = t[k];
                    wi *= wt[k];
                }
            } else {
                memcpy(x, X + i * dim, sizeof(double) * (size_t)dim);
                wi = W[i];
            }
            acc += wi * node_test_loss(x, m, qs, B, Rs, mix, M, mask, omega, A, causal, C, L, F, R, w, hs, u, su,
                                       S, T, K, forms, gains, p);
        }
        part[c] = acc;
        free(x);
    }
    double tot = 0.0;
    for (long c = 0; c < n_chunks; c++) tot += part[c];
    free(part);
    return tot;
}

#ifndef SHARDWISE_WORKER_COMPUTE_CPU_GEMM_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_GEMM_H_

// Row-major GEMM through BLAS (OpenBLAS), in float or double: the layers are templates
// over the element type, so the float64 gradient checks run the same code as training.
//   C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C

#include <cblas.h>

#include <cstdint>

namespace shardwise::cpu {

// BLAS threads for this process (one per worker by default: ranks are processes).
void SetBlasThreads(int threads);

inline void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

inline void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
                 int64_t ldc) {
  cblas_dgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_GEMM_H_

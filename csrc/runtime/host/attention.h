// Scaled dot-product attention on the host (the sdpa_fwd / sdpa_bwd custom calls,
// ir/custom_calls.def): per (batch, head), blocks of query rows against the keys they may see.
// With `causal` a block stops at its last row's key, so about half of the score and product
// work of a square causal problem is never done, and the [L, S] scores are never stored whole:
// each block's rows live in per-thread scratch. Products are the host GEMM's (gemm.h) on
// single-threaded calls, one thread per block; softmax and its gradient are f32.
#pragma once
#include <cstdint>

namespace torch_tpu::host {

struct SdpaDims {
  int64_t batch;    // batch * heads: independent problems
  int64_t L, S;     // queries, keys
  int64_t E, Ev;    // query/key width, value width
  bool causal;      // query i sees keys j <= i
  float scale;      // applied to the scores
  bool round_bf16;  // probabilities (and score gradients) rounded to bf16 before their products
  // 0: every tensor [batch, rows, width] (heads outermost); > 0, the head count: [B, rows,
  // heads, width] with batch = B * heads (a projection split into heads, read in place: each
  // head's rows are `heads * width` apart). logsumexp is [batch, L] either way.
  int64_t heads_inner = 0;
};

// out [batch, L, Ev] = softmax(scale * q k^T) v; lse [batch, L] = log of the row's softmax
// denominator plus its max (-inf, with out 0, for a row that sees no key).
void sdpa_forward(const SdpaDims& d, const float* q, const float* k, const float* v, float* out, float* lse);

// The gradients of sdpa_forward's out for dout, from the forward's lse (the probabilities
// are recomputed block by block; each row's softmax-gradient term is rowsum(dP * P), as the
// math path's softmax backward computes it).
void sdpa_backward(const SdpaDims& d, const float* q, const float* k, const float* v, const float* dout,
                   const float* lse, float* dq, float* dk, float* dv);

}  // namespace torch_tpu::host

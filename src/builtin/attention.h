// Attention generated in Triton (plan `attention`): each
// `F.scaled_dot_product_attention(q, k, v[, is_causal][, scale])` on float32
// tensors [..., L, E], [..., S, E], [..., S, Ev] becomes one flash-style
// kernel. A program takes BM queries of one (batch, head), walks the keys BN
// at a time with an online softmax (running maximum and sum, rescaled as the
// maximum grows), and accumulates P @ V in registers, so the L x S scores are
// never written. Both products use split-TF32 ("tf32x3") with fp32
// accumulation, as the GEMMs do (gemm.h). A causal mask is PyTorch's
// top-left one (query i sees keys j <= i); its programs stop at their last
// visible key block.
//
// Attention written out (softmax(Q K^T * c, masked) V, as GPT-style models
// do) is rewritten into one such call first (LowerExplicitAttention), with
// its boolean mask read by the kernel tile by tile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "builtin/graph.h"
#include "common/status.h"

namespace ax::builtin {

struct AttentionOp {
  std::string q, k, v;          // the operand nodes
  int64_t batch = 1;            // the product of the leading dimensions
  int64_t L = 0, S = 0, E = 0, EV = 0;
  bool causal = false;
  double scale = 0;             // 1/sqrt(E) unless given
  // Written-out attention's masked_fill(mask, -inf): a bool node of shape
  // [..., L, S] whose leading dimensions are 1 or the batch's; where it is
  // true the score is -inf. Empty: no mask.
  std::string mask;
  std::vector<int64_t> mask_shape;
  std::vector<int64_t> q_shape, k_shape, v_shape, out_shape;
};

struct AttentionSchedule {
  int bm = 64, bn = 64, warps = 4, stages = 2;
  bool operator==(const AttentionSchedule&) const = default;
  bool Valid() const;
  nlohmann::json ToJson() const;
  static Status FromJson(const nlohmann::json& j, AttentionSchedule* out);
};

// The callable of the node LowerExplicitAttention writes: args (q, k, v),
// kwargs scale (a number) and masked_fill (a bool node). Only the attention
// kernel computes it: it is never rendered as a PyTorch call.
inline constexpr const char* kExplicitAttention = "adaexplore.explicit_attention";

// True when node n is a scaled_dot_product_attention the compiler generates:
// float32 operands with the same leading dimensions, no attention mask, no
// dropout, no grouped-query broadcasting; or a kExplicitAttention node.
bool ClassifyAttention(const Graph& g, const Node& n, AttentionOp* out);

// Rewrites each written-out attention of g, matmul(softmax(masked_fill(
// matmul(q, k.transpose(-2, -1)) * c, mask, -inf), -1), v) (the scaling, by
// a product or a quotient, the mask and a dropout of p = 0 or in eval mode
// after the softmax each optional; every intermediate read by the next step
// alone), into one kExplicitAttention node named as the last product. Only
// rewrites that ClassifyAttention accepts are made. Returns how many; *out
// is g when there are none.
int LowerExplicitAttention(const Graph& g, Graph* out);

// A first tile configuration from the sequence lengths.
AttentionSchedule DefaultAttentionSchedule(const AttentionOp& op);

// The Triton kernel `_ax_attn_kernel<k>` and its launcher `_ax_attn<k>(q, k, v[, mask])`.
Status EmitAttention(const AttentionOp& op, size_t k, const AttentionSchedule& s, std::string* src);

}  // namespace ax::builtin

// The fusion decisions Schedule (schedule.h) makes, one function each: which
// norms an elementwise kernel applies itself, which elementwise groups run
// inside a reduction (prologues, epilogues) or a GEMM (epilogues), which
// reductions share a kernel, and which sums over a Linear's features the
// algebra rewrites. Pure functions of the graph and the operators formed;
// internal to the scheduler.
#pragma once

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "builtin/schedule.h"

namespace ax::builtin {

// For each group, the norms it applies itself: a norm whose readers are all
// in one group of the norm's shape. *fed gets the norm nodes.
std::vector<std::map<size_t, NormFeed>> FormFeeds(const Graph& g, const std::vector<Group>& groups,
                                                  const std::vector<std::pair<int, RedOp>>& reds, std::set<int>* fed);

// For each reduction, the group computed inside its kernel (plan
// reduce_prologue): a group whose one output only that reduction reads, of
// the reduction's input shape, applying no norm itself, not in taken; a norm
// that another kernel applies (fed) keeps its input.
std::map<size_t, size_t> FormPrologues(const Graph& g, const std::vector<Group>& groups,
                                       const std::vector<std::pair<int, RedOp>>& reds,
                                       const std::vector<std::map<size_t, NormFeed>>& feeds, const std::set<int>& fed,
                                       std::set<size_t> taken = {});

// For each reduction, the group run as its epilogue (plan red_epilogue): a
// sum, mean, max or min (no prologue, not rewritten away, not in skip_reds)
// whose value only that group reads, the group of the reduction's input
// shape, applying no norm, reading the value broadcast back over exactly the
// reduced dimensions; and rows that suit it (EpilogueFits under want).
std::map<size_t, RedEpi> FormRedEpilogues(const Graph& g, const std::vector<Group>& groups,
                                          const std::vector<std::pair<int, RedOp>>& reds,
                                          const std::vector<std::map<size_t, NormFeed>>& feeds,
                                          const std::set<size_t>& taken, const std::set<size_t>& skip_reds,
                                          const std::vector<RedSchedule>& want);

// Sums and means over a Linear's output features through a chain of
// elementwise operators affine in them (CountLinearReductions).
std::vector<LinearReduce> FormLinearReductions(const Graph& g, const std::vector<std::pair<int, RedOp>>& reds);

// For each GEMM, the group it runs as its epilogue: a group of C's shape
// that reads C, holding every reader of C, applying no norm itself.
std::map<size_t, size_t> FormEpilogues(const Graph& g, const std::vector<Group>& groups,
                                       const std::vector<std::pair<int, GemmOp>>& gemms,
                                       const std::vector<std::map<size_t, NormFeed>>& feeds);

// Sibling reductions (plan siblings): leader -> the later reductions computed
// in its kernel (sums, means, maxima or minima over the same rows of one
// shape sharing a tensor input; reductions in skip left alone).
std::map<size_t, std::vector<size_t>> FormSiblings(const Graph& g, const std::vector<Group>& groups,
                                                   const std::vector<std::pair<int, RedOp>>& reds,
                                                   const std::map<size_t, size_t>& prologue_of,
                                                   const std::set<size_t>& skip);

}  // namespace ax::builtin

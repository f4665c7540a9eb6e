#include "builtin/codegen.h"

#include "builtin/attention.h"
#include "builtin/ewgen.h"
#include "builtin/conv.h"
#include "builtin/conv_stats.h"
#include "builtin/ew_ops.h"
#include "builtin/gemm.h"
#include "builtin/graph_capture.h"
#include "builtin/packed_weight.h"
#include "builtin/pywriter.h"
#include "builtin/reduce_fusion.h"
#include "builtin/rnn.h"
#include "builtin/schedule.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace ax::builtin {

using json = nlohmann::json;

namespace {

// The forward's variable of a graph node. With `uses`, the name is recorded
// there: the forward's statements note the variables they name, and each is
// deleted after the last statement naming it (`del`), so that PyTorch's
// caching allocator reuses its memory for what the forward allocates next.
std::string Var(const std::string& node, std::set<std::string>* uses = nullptr) {
  std::string v = "v_" + node;
  if (uses) uses->insert(v);
  return v;
}


// A Python expression for a traced argument (fallback PyTorch calls).
Status RenderArg(const json& a, std::string* out, std::set<std::string>* uses = nullptr) {
  if (a.contains("node")) {
    *out = Var(a["node"].get<std::string>(), uses);
    return Status::Ok();
  }
  bool tup = a.contains("tuple");
  if (tup || a.contains("list")) {
    std::string s = tup ? "(" : "[";
    const json& items = tup ? a["tuple"] : a["list"];
    for (const auto& x : items) {
      std::string e;
      Status st = RenderArg(x, &e, uses);
      if (!st.ok()) return st;
      s += e + ", ";
    }
    *out = s + (tup ? ")" : "]");
    return Status::Ok();
  }
  if (a.contains("dict")) {
    std::string s = "{";
    for (const auto& [k, v] : a["dict"].items()) {
      std::string e;
      Status st = RenderArg(v, &e, uses);
      if (!st.ok()) return st;
      s += json(k).dump() + ": " + e + ", ";
    }
    *out = s + "}";
    return Status::Ok();
  }
  if (a.contains("repr") && a["repr"].is_string()) {
    *out = a["repr"].get<std::string>();
    return Status::Ok();
  }
  return Status::Error("an argument has no Python form (" + a.value("unrepresentable", std::string("?")) + ")");
}

Status RenderCallArgs(const Node& n, size_t skip, std::string* out, std::set<std::string>* uses = nullptr) {
  std::string s;
  for (size_t i = skip; i < n.args.size(); ++i) {
    std::string e;
    Status st = RenderArg(n.args[i], &e, uses);
    if (!st.ok()) return st;
    s += (s.empty() ? "" : ", ") + e;
  }
  for (const auto& [k, v] : n.kwargs.items()) {
    std::string e;
    Status st = RenderArg(v, &e, uses);
    if (!st.ok()) return st;
    s += (s.empty() ? "" : ", ") + k + "=" + e;
  }
  *out = s;
  return Status::Ok();
}

bool IsIdent(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// self.a.b, or a getattr chain when a part is not an identifier (layers.0).
std::string AttrExpr(const std::string& path) {
  std::string e = "self";
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '.')) {
    e = IsIdent(part) ? e + "." + part : "getattr(" + e + ", " + json(part).dump() + ")";
  }
  return e;
}

// The variable holding norm k's (mean, var), computed by a convolution's kernel.
std::string StatsVar(size_t k, std::set<std::string>* uses = nullptr) {
  std::string v = "_ax_stats" + std::to_string(k);
  if (uses) uses->insert(v);
  return v;
}

// The launcher's second argument: the Linear module or the other matrix.
// A convolution's: its weight and bias (a module's, or a functional one's nodes).
std::string GemmSecond(const GemmOp& op, std::set<std::string>* uses) {
  if (op.IsConv() && !op.module.empty()) return AttrExpr(op.module) + ".weight, " + AttrExpr(op.module) + ".bias";
  if (op.IsConv()) return Var(op.weight, uses) + ", " + (op.bias.empty() ? "None" : Var(op.bias, uses));
  return op.module.empty() ? Var(op.other, uses) : AttrExpr(op.module);
}

}  // namespace

Status Generate(const Graph& g, const std::string& task_source, const Plan& plan, std::string* source,
                int* kernels, Plan* resolved) {
  const FusedSchedule s = Schedule(g, plan);
  if (s.groups.empty() && s.reds.empty() && s.gemms.empty() && s.rnorms.empty() && s.attns.empty() &&
      s.rnns.empty()) {
    return Status::Error(StatusCode::kUnsupported, "nothing to fuse: every operator stays a library call");
  }
  if (kernels) *kernels = s.TritonKernels();
  const auto& groups = s.groups;
  const auto& reds = s.reds;
  const auto& gemms = s.gemms;
  const auto& rnorms = s.rnorms;
  const auto& feeds = s.feeds;
  const auto& fed = s.fed;
  const auto& unused = s.unused;
  const auto& linred_of = s.linred_of;
  const auto& epilogue_of = s.epilogue_of;
  const auto& gemm_of_group = s.gemm_of_group;
  const auto& prologue_of = s.prologue_of;
  const auto& epi_of = s.epi_of;
  const auto& epi_of_group = s.epi_of_group;
  const auto& sib_of = s.sib_of;
  const auto& follower = s.follower;
  const auto& inside = s.inside;
  const Plan& written = s.resolved;

  // Where each generated operation sits in the forward.
  std::map<int, size_t> red_of, gemm_of, rnorm_of, attn_of, rnn_of;  // node -> its index
  std::set<std::string> absorbed;  // nodes a reduction replaces (max/min before [0])
  for (size_t k = 0; k < reds.size(); ++k) {
    red_of[reds[k].first] = k;
    absorbed.insert(reds[k].second.absorbed.begin(), reds[k].second.absorbed.end());
  }
  for (size_t k = 0; k < gemms.size(); ++k) gemm_of[gemms[k].first] = k;
  for (size_t k = 0; k < rnorms.size(); ++k) rnorm_of[rnorms[k].first] = k;
  for (size_t k = 0; k < s.attns.size(); ++k) attn_of[s.attns[k].first] = k;
  for (size_t k = 0; k < s.rnns.size(); ++k) rnn_of[s.rnns[k].first] = k;
  std::map<int, size_t> last_of;  // the last node of a group -> the group
  std::set<int> fused;
  for (size_t k = 0; k < groups.size(); ++k) {
    last_of[groups[k].nodes.back()] = k;
    fused.insert(groups[k].nodes.begin(), groups[k].nodes.end());
  }

  std::map<size_t, const FusedKernel*> gemm_kernel;  // GEMM -> its scheduled kernel
  for (const FusedKernel& fk : s.kernels) {
    if (fk.kind == KernelKind::kGemm || fk.kind == KernelKind::kConvolution) gemm_kernel[fk.index] = &fk;
  }

  // The kernels, in the schedule's order.
  std::string kernel_src;
  std::map<size_t, std::vector<std::string>> sib_inputs;  // leader -> its launcher's inputs
  for (const FusedKernel& fk : s.kernels) {
    const size_t k = fk.index;
    Status st;
    switch (fk.kind) {
      case KernelKind::kPointwise: {
        const StoreRemaps rm = s.cats.RemapsOf(groups[k].outputs);
        st = EmitGroup(g, groups[k], k, written.For(k), feeds[k], &kernel_src, &rm);
        break;
      }
      case KernelKind::kRowNorm:
        st = EmitRowNorm(rnorms[k].second, k, written.nsched[k], &kernel_src);
        break;
      case KernelKind::kGemm:
      case KernelKind::kConvolution:
      {
        ColumnTail tail;
        if (fk.column) {
          tail.op = &reds[*fk.column].second;
          tail.node = g.nodes[reds[*fk.column].first].name;
          if (fk.column_post) tail.post = &groups[*fk.column_post];
        }
        ConvStatsTail stats;
        if (fk.stats) {
          stats.norm = &reds[*fk.stats].second;
          if (!StatsRowsOf(*stats.norm, gemms[k].second, &stats.rows)) {
            return Status::Error("a norm whose statistics the convolution cannot compute");
          }
        }
        const StoreRemaps rm = s.cats.RemapsOf(FlatOutputs(g, s, fk));
        st = EmitGemm(g, g.nodes[gemms[k].first], gemms[k].second, k, written.GemmFor(k),
                      fk.epilogue.empty() ? nullptr : &groups[fk.epilogue.front()], &kernel_src,
                      fk.column ? &tail : nullptr, fk.stats ? &stats : nullptr, &rm);
      }
        break;
      case KernelKind::kAttention:
        st = EmitAttention(s.attns[k].second, k, written.asched[k], &kernel_src);
        break;
      case KernelKind::kRecurrent:
        st = EmitRnn(s.rnns[k].second, k, written.rsched[k], &kernel_src);
        break;
      case KernelKind::kLinearReduction:
        kernel_src += EmitLinearReduce(g, s.linreds[linred_of.at(k)], reds[k].second, linred_of.at(k));
        break;
      case KernelKind::kSiblings: {
        std::vector<size_t> members = {k};
        members.insert(members.end(), fk.members.begin(), fk.members.end());
        std::vector<const RedOp*> ops;
        std::vector<const Group*> pg;
        std::vector<std::string> direct;
        for (size_t m : members) {
          ops.push_back(&reds[m].second);
          const auto p = prologue_of.find(m);
          pg.push_back(p == prologue_of.end() ? nullptr : &groups[p->second]);
          direct.push_back(p == prologue_of.end() ? reds[m].second.input : "");
        }
        ReductionPrologue pro;
        st = MakeSiblingPrologue(g, pg, direct, reds[k].second.in_shape, &pro, &sib_inputs[k]);
        if (st.ok()) st = EmitSiblingReductions(ops, k, written.RedFor(k), pro, &kernel_src);
        break;
      }
      case KernelKind::kReduction: {
        if (s.conv_of_stats.count(k)) {  // its statistics come from the convolution's kernel
          st = reds[k].second.kind == "mean" ? EmitMeanFromStatistics(reds[k].second, k, &kernel_src)
                                             : EmitNormFromStatistics(reds[k].second, k, &kernel_src);
          break;
        }
        ReductionPrologue pro;
        const bool with = !fk.prologue.empty();
        if (with) st = MakePrologue(g, groups[fk.prologue.front()], &pro);
        ReductionEpilogue epi;
        const bool with_epi = !fk.epilogue.empty();
        if (st.ok() && with_epi) {
          const RedEpi& e = epi_of.at(k);
          // what the reduction's kernel already holds at the element: its
          // prologue's inputs, or x itself (in v)
          const std::map<std::string, std::string> loaded =
              with ? pro.loaded : std::map<std::string, std::string>{{reds[k].second.input, "v"}};
          st = MakeRedEpilogue(g, e.has_pre() ? &groups[e.pre] : nullptr, groups[e.main], g.nodes[reds[k].first].name,
                               loaded, &epi);
        }
        if (st.ok()) {
          st = EmitReduction(reds[k].second, k, written.RedFor(k), &kernel_src, with ? &pro : nullptr,
                             with_epi ? &epi : nullptr);
        }
        break;
      }
    }
    if (!st.ok()) return st;
  }

  // Scalar constants (torch.tensor(number)) that only fused kernels read, as
  // numbers, and device lookups nothing else needs, are not emitted.
  std::set<int> dropped;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    double unused;
    if (!IsDeviceOf(n) && !IsScalarConstant(n, &unused)) continue;
    bool needed = false;
    for (int u : n.users) needed = needed || !(fused.count(u) || dropped.count(u));
    if (!needed) dropped.insert(static_cast<int>(i));
  }

  // The variables the statement being written names (Var's `uses`).
  std::set<std::string> uses;

  std::vector<std::string> params;
  std::string first_tensor;  // the first tensor input: where constants are rebuilt
  // The forward's statements, at the depth of `def forward`'s body, each
  // with the variables it names.
  struct Statement {
    std::string text;
    std::set<std::string> uses;
    bool returns = false;
  };
  std::vector<Statement> stmts;
  std::ostringstream body;  // the statement being written
  auto end_statement = [&](bool returns = false) {
    stmts.push_back({body.str(), std::move(uses), returns});
    uses.clear();
    body.str("");
  };

  // Concatenations written in place (cat_slots.h): the result is allocated
  // by a statement of its own before the first kernel that stores a piece
  // into it (on the first input's device), and each such kernel's launch
  // takes its slice.
  std::set<size_t> allocated;
  auto allocate_cat = [&](size_t c) {
    if (!allocated.insert(c).second) return;
    const CatOp& cat = s.cats.cats[c];
    body << Var(g.nodes[cat.node].name, &uses) << " = torch.empty(" << PyShape(cat.shape) << ", device=" << first_tensor
         << ".device, dtype=" << cat.dtype << ")";
    end_statement();
  };
  auto allocate_cats = [&](const std::vector<std::string>& outputs) {
    for (const auto& o : outputs) {
      if (auto it = s.cats.slot_of.find(o); it != s.cats.slot_of.end()) allocate_cat(it->second.cat);
    }
  };
  // The slices a launch stores its remapped outputs into, after its other
  // arguments, in the order of the outputs (DstParams).
  auto dst_args = [&](const std::vector<std::string>& outputs) {
    std::string a;
    for (const auto& o : outputs) {
      if (auto it = s.cats.slot_of.find(o); it != s.cats.slot_of.end()) {
        const CatOp& cat = s.cats.cats[it->second.cat];
        a += ", " + cat.Slice(Var(g.nodes[cat.node].name, &uses), it->second.piece);
      }
    }
    return a;
  };

  // The launch of GEMM or convolution gk: its input and weight (or module),
  // its epilogue's other inputs, and those of the group run on its column
  // reduction's value, then the slices of its outputs written in place.
  auto gemm_call = [&](size_t gk) {
    const GemmOp& op = gemms[gk].second;
    std::string call = "_ax_gemm" + std::to_string(gk) + "(" + Var(op.input, &uses) + ", " + GemmSecond(op, &uses);
    if (auto e = epilogue_of.find(gk); e != epilogue_of.end()) {
      for (const auto& in : groups[e->second].inputs) {
        if (in != g.nodes[gemms[gk].first].name) call += ", " + Var(in, &uses);
      }
    }
    if (auto c = s.column_of.find(gk); c != s.column_of.end() && c->second.has_post()) {
      for (const auto& in : groups[c->second.post].inputs) {
        if (in != g.nodes[reds[c->second.red].first].name) call += ", " + Var(in, &uses);
      }
    }
    return call + dst_args(FlatOutputs(g, s, *gemm_kernel.at(gk))) + ")";
  };

  // The norm statistics a convolution's launch returns too (conv_stats.h).
  auto stats_lhs = [&](size_t gk) {
    const auto st = s.stats_of.find(gk);
    return st == s.stats_of.end() ? std::string() : ", " + StatsVar(st->second, &uses);
  };

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string v = Var(n.name);  // written as the statement's target, not a use
    uses.clear();
    if (n.op == "placeholder") {
      if (!IsIdent(n.target)) return Status::Error("forward takes variadic arguments (" + n.target + ")");
      params.push_back(v);
      if (first_tensor.empty() && n.is_tensor) first_tensor = v;
      continue;
    }
    if (auto it = last_of.find(static_cast<int>(i)); it != last_of.end()) {
      const Group& grp = groups[it->second];
      if (auto ge = gemm_of_group.find(it->second); ge != gemm_of_group.end()) {
        // the GEMM it reads runs it as its epilogue, launched here (or at the
        // group run on its column reduction's value)
        const size_t gk = ge->second;
        const auto c = s.column_of.find(gk);
        if (c != s.column_of.end() && c->second.has_post()) continue;
        allocate_cats(FlatOutputs(g, s, *gemm_kernel.at(gk)));
        if (c != s.column_of.end()) {
          body << Var(g.nodes[reds[c->second.red].first].name, &uses);  // the reduction's value, computed there too
        } else {
          for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j], &uses);
        }
        body << stats_lhs(gk) << " = " << gemm_call(gk);
        end_statement();
        continue;
      }
      if (auto gp = s.gemm_of_post.find(it->second); gp != s.gemm_of_post.end()) {
        // run on the value of the reduction over a GEMM's columns, in the GEMM's kernel, launched here
        for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j], &uses);
        body << " = " << gemm_call(gp->second);
        end_statement();
        continue;
      }
      if (auto e = epi_of_group.find(it->second); e != epi_of_group.end()) {
        // run by the reduction it reads, launched here
        std::set<std::string> skip_in = {g.nodes[reds[e->second].first].name};
        if (const RedEpi& re = epi_of.at(e->second); re.has_pre()) {
          skip_in.insert(groups[re.pre].outputs.begin(), groups[re.pre].outputs.end());
        }
        for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j], &uses);
        body << " = _ax_red" << e->second << "(";
        if (auto p = prologue_of.find(e->second); p != prologue_of.end()) {
          const Group& pg = groups[p->second];
          for (size_t j = 0; j < pg.inputs.size(); ++j) body << (j ? ", " : "") << Var(pg.inputs[j], &uses);
        } else {
          body << Var(reds[e->second].second.input, &uses);
        }
        for (const auto& in : grp.inputs) {
          if (!skip_in.count(in)) body << ", " << Var(in, &uses);
        }
        body << ")";
        end_statement();
        continue;
      }
      if (inside.count(it->second)) continue;  // computed by the reduction that reads it
      allocate_cats(grp.outputs);
      for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j], &uses);
      body << " = _ax_launch" << it->second << "(";
      for (size_t j = 0; j < grp.inputs.size(); ++j) {
        body << (j ? ", " : "");
        if (auto f = feeds[it->second].find(j); f != feeds[it->second].end()) {
          body << Var(f->second.op.input, &uses) << ", " << AttrExpr(f->second.op.module);
          if (f->second.stats_in) body << ", " << StatsVar(f->second.k_red, &uses);
        } else {
          body << Var(grp.inputs[j], &uses);
        }
      }
      body << dst_args(grp.outputs) << ")";
      end_statement();
      continue;
    }
    if (fused.count(static_cast<int>(i)) || absorbed.count(n.name) || fed.count(static_cast<int>(i)) ||
        dropped.count(static_cast<int>(i))) {
      continue;
    }
    if (IsDeviceOf(n) && !first_tensor.empty()) {
      // x may live inside a fused kernel (never materialised): every input
      // of a KernelBench forward is on one device.
      body << v << " = " << first_tensor << ".device";
      end_statement();
      continue;
    }
    if (unused.count(static_cast<int>(i))) continue;  // rewritten away
    if (auto it = s.cats.cat_of_node.find(static_cast<int>(i)); it != s.cats.cat_of_node.end()) {
      // written in place: the pieces no kernel stored into their slices are copied there
      const CatOp& cat = s.cats.cats[it->second];
      allocate_cat(it->second);
      for (size_t p = 0; p < cat.pieces.size(); ++p) {
        if (cat.pieces[p].in_place) continue;
        body << cat.Slice(Var(n.name, &uses), p) << ".copy_(" << Var(cat.pieces[p].node, &uses) << ")";
        end_statement();
      }
      continue;
    }
    if (auto it = rnorm_of.find(static_cast<int>(i)); it != rnorm_of.end()) {
      const RowNormOp& op = rnorms[it->second].second;
      body << v << " = _ax_rnorm" << it->second << "(" << Var(op.input, &uses);
      if (op.weight == RowNormOp::Weight::kNode) body << ", " << Var(op.weight_ref, &uses);
      if (op.weight == RowNormOp::Weight::kModule) body << ", " << AttrExpr(op.weight_ref) << ".weight";
      body << ")";
      end_statement();
      continue;
    }
    if (auto it = attn_of.find(static_cast<int>(i)); it != attn_of.end()) {
      const AttentionOp& op = s.attns[it->second].second;
      body << v << " = _ax_attn" << it->second << "(" << Var(op.q, &uses) << ", " << Var(op.k, &uses) << ", " << Var(op.v, &uses)
           << (op.mask.empty() ? "" : ", " + Var(op.mask, &uses)) << ")";
      end_statement();
      continue;
    }
    if (auto it = rnn_of.find(static_cast<int>(i)); it != rnn_of.end()) {
      const RnnOp& op = s.rnns[it->second].second;
      auto state = [&](const std::string& node) { return node.empty() ? std::string("None") : Var(node, &uses); };
      body << v << " = _ax_rnn" << it->second << "(" << Var(op.x, &uses) << ", " << state(op.h0) << ", "
           << (op.mode == "LSTM" ? state(op.c0) + ", " : "") << AttrExpr(op.module) << ")";
      end_statement();
      continue;
    }
    if (auto it = gemm_of.find(static_cast<int>(i)); it != gemm_of.end()) {
      if (epilogue_of.count(it->second)) continue;  // launched with its epilogue
      const auto c = s.column_of.find(it->second);
      if (c != s.column_of.end() && c->second.has_post()) continue;  // launched with that group
      allocate_cats(FlatOutputs(g, s, *gemm_kernel.at(it->second)));
      if (c != s.column_of.end()) {
        body << Var(g.nodes[reds[c->second.red].first].name, &uses);  // only the reduction over its columns is stored
      } else {
        body << (s.cats.slot_of.count(n.name) ? Var(n.name, &uses) : v);  // a slice: read by nothing after
      }
      body << stats_lhs(it->second) << " = " << gemm_call(it->second);
      end_statement();
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && linred_of.count(it->second)) {
      const LinearReduce& lr = s.linreds[linred_of.at(it->second)];
      body << v << " = _ax_linred" << linred_of.at(it->second) << "(" << Var(lr.gemm.input, &uses) << ", "
           << AttrExpr(lr.gemm.module);
      for (const auto& o : lr.operands) body << ", " << Var(o, &uses);
      body << ")";
      end_statement();
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && epi_of.count(it->second)) {
      continue;  // computed inside the kernel of the group that reads it
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && s.gemm_of_column.count(it->second)) {
      continue;  // computed by the GEMM or convolution it reduces
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && follower.count(it->second)) {
      continue;  // computed with its sibling reductions, at the first of them
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && sib_of.count(it->second)) {
      body << v;
      for (size_t m : sib_of.at(it->second)) body << ", " << Var(g.nodes[reds[m].first].name, &uses);
      body << " = _ax_red" << it->second << "(";
      const auto& ins = sib_inputs.at(it->second);
      for (size_t j = 0; j < ins.size(); ++j) body << (j ? ", " : "") << Var(ins[j], &uses);
      body << ")";
      end_statement();
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end()) {
      const RedOp& op = reds[it->second].second;
      body << v << " = _ax_red" << it->second << "(";
      if (auto p = prologue_of.find(it->second); p != prologue_of.end()) {
        const Group& grp = groups[p->second];
        for (size_t j = 0; j < grp.inputs.size(); ++j) body << (j ? ", " : "") << Var(grp.inputs[j], &uses);
      } else {
        body << Var(op.input, &uses);
      }
      if (op.kind == "norm") body << ", " << AttrExpr(op.module);
      if (s.conv_of_stats.count(it->second)) body << ", " << StatsVar(it->second, &uses);
      if (op.kind == "xent") body << ", " << Var(op.target, &uses);
      body << ")";
      end_statement();
      continue;
    }
    std::string args;
    Status st;
    if (n.op == "get_attr" && n.is_constant) {
      // Not an attribute of the model: rebuilt here, on the inputs' device.
      if (n.constant_expr.empty()) return Status::Error("the forward creates a tensor constant too large to inline");
      if (first_tensor.empty()) return Status::Error("a tensor constant in a forward without tensor inputs");
      body << v << " = " << n.constant_expr << ".to(" << first_tensor << ".device)";
      end_statement();
    } else if (n.op == "get_attr") {
      body << v << " = " << AttrExpr(n.target);
      end_statement();
    } else if (n.op == "call_module") {
      st = RenderCallArgs(n, 0, &args, &uses);
      if (!st.ok()) return st;
      body << v << " = " << AttrExpr(n.target) << "(" << args << ")";
      end_statement();
    } else if (n.op == "call_function") {
      if (n.callable.empty()) return Status::Error("no Python name for function " + n.target);
      st = RenderCallArgs(n, 0, &args, &uses);
      if (!st.ok()) return st;
      body << v << " = " << n.callable << "(" << args << ")";
      end_statement();
    } else if (n.op == "call_method") {
      if (n.args.empty() || !IsIdent(n.target)) return Status::Error("malformed method call " + n.name);
      std::string self;
      st = RenderArg(n.args[0], &self, &uses);
      if (!st.ok()) return st;
      st = RenderCallArgs(n, 1, &args, &uses);
      if (!st.ok()) return st;
      body << v << " = " << self << "." << n.target << "(" << args << ")";
      end_statement();
    } else if (n.op == "output") {
      if (n.args.empty()) return Status::Error("output node without a value");
      st = RenderArg(n.args[0], &args, &uses);
      if (!st.ok()) return st;
      body << "return " << args;
      end_statement(true);
    } else {
      return Status::Error("unknown node kind " + n.op);
    }
  }

  // Buffers reused across the forward: each variable (other than the
  // forward's inputs) is deleted right after the last statement that names
  // it, so the caching allocator (or a CUDA graph's pool, during capture)
  // hands its memory to the next allocation of the stream instead of keeping
  // every intermediate alive to the end of the call.
  std::map<std::string, size_t> last_use;
  for (size_t i = 0; i < stmts.size(); ++i) {
    for (const auto& u : stmts[i].uses) last_use[u] = i;
  }
  const std::set<std::string> inputs(params.begin(), params.end());
  PyWriter fwd(2);
  for (size_t i = 0; i < stmts.size(); ++i) {
    fwd.Line(stmts[i].text);
    if (stmts[i].returns) continue;
    std::string dead;
    for (const auto& u : stmts[i].uses) {
      if (last_use[u] == i && !inputs.count(u)) dead += (dead.empty() ? "" : ", ") + u;
    }
    if (!dead.empty()) fwd.Line("del " + dead);
  }

  std::ostringstream out;
  out << "# Generated by adaexplore's builtin compiler: the task's own source, Triton kernels\n"
      << "# for the fused elementwise operators, and ModelNew(Model) overriding forward.\n"
      << kPlanMarker << written.ToJson().dump() << "\n\n";
  out << task_source;
  if (!task_source.empty() && task_source.back() != '\n') out << "\n";
  out << "\n\n# ---- adaexplore builtin kernels ----\n"
      << "import builtins\nimport math\nimport operator\nimport weakref\n\nimport torch\nimport triton\nimport triton.language as tl\n\n\n";
  if (kernel_src.find("_ax_coop_launch(") != std::string::npos) out << CoopLaunchHelper();
  if (kernel_src.find("_ax_nanmax(") != std::string::npos || kernel_src.find("_ax_nanmin(") != std::string::npos) {
    out << NanMinMaxHelpers();
  }
  if (plan.cuda_graph) out << CudaGraphHelper();
  const bool packed = kernel_src.find("_ax_packed_weight(") != std::string::npos;
  if (packed) out << PackedWeightHelper();
  out << kernel_src;
  std::string plist, args;  // ", a, b" after self; "a, b," as a tuple's items
  for (const auto& p : params) plist += ", " + p, args += p + ", ";
  out << "class ModelNew(Model):\n";
  if (plan.cuda_graph) {
    // forward replays _ax_forward, the generated forward, from a CUDA graph
    if (params.size() > 1) args.resize(args.size() - 2);
    else if (params.size() == 1) args.pop_back();
    out << "    def forward(self" << plist << "):\n"
        << "        return _ax_graphed(self, self._ax_forward, (" << args << ")"
        << (packed ? ", _ax_packs_stale" : "") << ")\n\n"
        << "    def _ax_forward(self" << plist << "):\n";
  } else {
    out << "    def forward(self" << plist << "):\n";
  }
  out << fwd.str();
  *source = out.str();
  if (resolved) *resolved = written;
  return Status::Ok();
}

}  // namespace ax::builtin


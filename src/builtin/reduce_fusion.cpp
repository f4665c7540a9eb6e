// Reductions fused with their neighbours, for codegen: an elementwise group
// computed inside a reduction's kernel in place of loading its input
// (prologue), one run on the row after its value (epilogue), the values
// sibling reductions share, and a reduction over a Linear's output features
// rewritten as a matrix-vector product.
#include "builtin/reduce_fusion.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "builtin/ewgen.h"
#include "builtin/pywriter.h"

namespace ax::builtin {

namespace {

// Group grp computed inside a reduction's kernel (ReductionPrologue): the
// reduction's launcher takes the group's inputs; the kernel loads them at
// the reduction's flat index and runs the group's operators on the way.
// The kernel side of group grp computed at the flat index `offs` under mask
// `m` (ReductionPrologue): its inputs as in<i> (tensors loaded into pin<i>),
// its operators, and results[j] the variable holding node results_of[j].
Status RenderPrologue(const Graph& g, const Group& grp, const std::vector<std::string>& results_of,
                      ReductionPrologue* out) {
  const size_t first_tensor = FirstTensorInput(g, grp);
  if (first_tensor == grp.inputs.size()) return Status::Error("a prologue without tensor inputs");
  ReductionPrologue p;
  std::map<std::string, std::string> names;
  PyWriter head, lines;
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    const std::string si = std::to_string(i);
    const Node& in = *g.Find(grp.inputs[i]);
    p.params.push_back("in" + si);
    InputPrelude(&head, in, i);
    names[grp.inputs[i]] = in.is_number ? "in" + si : "pin" + si;
    if (!in.is_number) InputLoad(&lines, in, grp, i, "pin" + si, "m");
    if (!in.is_number && in.shape == grp.shape) p.loaded[grp.inputs[i]] = "pin" + si;
  }
  Status st = RenderGroupOps(g, grp, &lines, &names);
  if (!st.ok()) return st;
  p.head = head.str();
  p.lines = lines.str();
  for (const auto& r : results_of) p.results.push_back(names.at(r));
  p.tensor = "in" + std::to_string(first_tensor);
  *out = std::move(p);
  return Status::Ok();
}

}  // namespace

Status MakePrologue(const Graph& g, const Group& grp, ReductionPrologue* out) {
  if (grp.outputs.size() != 1) return Status::Error("a prologue has one output");
  Status st = RenderPrologue(g, grp, grp.outputs, out);
  if (!st.ok()) return st;
  out->load = [loads = out->lines, result = out->results[0]](const std::string& other) {
    return loads + "v = tl.where(m, " + result + ", " + other + ")\n";
  };
  return Status::Ok();
}


// Group grp as the epilogue of the reduction whose value is node `value`,
// after group pre (on the value alone, computed once per row) when given.
Status MakeRedEpilogue(const Graph& g, const Group* pre, const Group& grp, const std::string& value,
                       const std::map<std::string, std::string>& loaded, ReductionEpilogue* out) {
  ReductionEpilogue e;
  std::map<std::string, std::string> base = {{value, "red2"}};
  if (pre) {
    PyWriter once;
    Status st = RenderGroupOps(g, *pre, &once, &base);
    if (!st.ok()) return st;
    e.once = once.str();
  }
  PyWriter head;
  // lines: every input loaded; coop_lines: those in `loaded` taken from there
  for (int reuse : {0, 1}) {
    std::map<std::string, std::string> names = base;
    PyWriter loads;
    for (size_t i = 0; i < grp.inputs.size(); ++i) {
      if (names.count(grp.inputs[i])) continue;  // the value, or what pre made of it
      // named ein<i>: a prologue's inputs, in the same kernel, are in<i>
      const std::string si = std::to_string(i);
      const Node& in = *g.Find(grp.inputs[i]);
      if (!reuse) {
        e.params.push_back("ein" + si);
        InputPrelude(&head, in, i, "ein");
      }
      names[grp.inputs[i]] = in.is_number ? "ein" + si : "epin" + si;
      if (in.is_number) continue;
      auto l = loaded.find(grp.inputs[i]);
      if (reuse && l != loaded.end() && in.shape == grp.shape) {
        names[grp.inputs[i]] = l->second;
      } else {
        InputLoad(&loads, in, grp, i, "epin" + si, "m", "ein");
      }
    }
    Status st = RenderGroupOps(g, grp, &loads, &names);
    if (!st.ok()) return st;
    for (size_t i = 0; i < grp.outputs.size(); ++i) {
      loads.Line("tl.store(out" + std::to_string(i) + " + offs, " + names.at(grp.outputs[i]) + ", mask=m)");
    }
    (reuse ? e.coop_lines : e.lines) = loads.str();
  }
  e.head = head.str();
  e.outputs = grp.outputs.size();
  *out = std::move(e);
  return Status::Ok();
}


// The launcher `_ax_linred<k>(x, mod, operands...)`: torch calls (a
// matrix-vector product and sums of parameters) computing lr's reduction.
std::string EmitLinearReduce(const Graph& g, const LinearReduce& lr, const RedOp& op, size_t k) {
  const GemmOp& gm = lr.gemm;
  const std::string N = std::to_string(gm.N);
  std::string sig = "x, mod";
  for (size_t i = 0; i < lr.operands.size(); ++i) sig += ", c" + std::to_string(i);
  PyWriter w;
  {
    auto launcher = w.Open("def _ax_linred" + std::to_string(k) + "(" + sig + "):");
    w.Line("# " + op.kind + " over the " + N + " output features of a Linear" +
           (lr.chain.empty() ? "" : " through an affine chain") +
           ": x . (sum_n W_n) + sum_n b_n, then the chain on the sum (no matrix product)");
    w.Line("assert list(x.shape) == " + PyShape(gm.in_shape) + ", \"the kernel was generated for the traced shapes\"");
    w.Line("s = torch.mv(x.reshape(" + std::to_string(gm.M) + ", " + std::to_string(gm.K) + "), mod.weight.sum(0))");
    if (gm.has_bias) w.Line("s = s + mod.bias.sum()");
    for (const auto& [kind, c] : lr.steps) {
      // the sum over the features of the other operand broadcast to [.., N]
      std::string cv, csum;
      if (c.node.empty()) {
        cv = PyFloat(c.value);
        csum = PyFloat(c.value) + " * " + N;
      } else {
        const size_t pos = std::find(lr.operands.begin(), lr.operands.end(), c.node) - lr.operands.begin();
        const Node& cn = *g.Find(c.node);
        cv = "c" + std::to_string(pos);
        if (cn.is_number) {
          cv = "float(" + cv + ")";
          csum = cv + " * " + N;
        } else {
          const bool per_feature = !cn.shape.empty() && cn.shape.back() == gm.N;
          cv = cv + ".reshape(())";
          csum = per_feature ? "c" + std::to_string(pos) + ".sum()" : cv + " * " + N;
        }
      }
      if (kind == "add") w.Line("s = s + " + csum);
      else if (kind == "sub") w.Line("s = s - " + csum);
      else if (kind == "rsub") w.Line("s = " + csum + " - s");
      else if (kind == "mul") w.Line("s = s * " + cv);
      else w.Line("s = s / " + cv);
    }
    if (op.kind == "mean") w.Line("s = s / " + N);
    w.Line("return s.reshape(" + PyShape(op.out_shape) + ")");
  }
  w.Line().Line();
  return w.str();
}

// The values sibling reductions read, computed in one kernel: the union of
// their prologue groups (or their inputs, read directly) with each shared
// input loaded once; results[j] is member j's value.
Status MakeSiblingPrologue(const Graph& g, const std::vector<const Group*>& pro, const std::vector<std::string>& direct,
                           const std::vector<int64_t>& shape, ReductionPrologue* out,
                           std::vector<std::string>* inputs) {
  Group u;
  u.shape = shape;
  std::vector<std::string> result_nodes;
  auto add_input = [&](const std::string& in) {
    if (std::find(u.inputs.begin(), u.inputs.end(), in) == u.inputs.end()) u.inputs.push_back(in);
  };
  for (size_t j = 0; j < pro.size(); ++j) {
    if (!pro[j]) {
      add_input(direct[j]);
      result_nodes.push_back(direct[j]);
      continue;
    }
    if (pro[j]->outputs.size() != 1) return Status::Error("a prologue has one output");
    for (const auto& in : pro[j]->inputs) add_input(in);
    u.nodes.insert(u.nodes.end(), pro[j]->nodes.begin(), pro[j]->nodes.end());
    u.ops.insert(pro[j]->ops.begin(), pro[j]->ops.end());
    result_nodes.push_back(pro[j]->outputs[0]);
  }
  Status st = RenderPrologue(g, u, result_nodes, out);
  if (!st.ok()) return st;
  *inputs = u.inputs;
  return Status::Ok();
}


}  // namespace ax::builtin

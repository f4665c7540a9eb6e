#include "builtin/codegen.h"

#include "builtin/attention.h"
#include "builtin/ewgen.h"
#include "builtin/conv.h"
#include "builtin/ew_ops.h"
#include "builtin/gemm.h"
#include "builtin/graph_capture.h"
#include "builtin/pywriter.h"
#include "builtin/schedule.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace ax::builtin {

using json = nlohmann::json;

namespace {

std::string Var(const std::string& node) { return "v_" + node; }


// A Python expression for a traced argument (fallback PyTorch calls).
Status RenderArg(const json& a, std::string* out) {
  if (a.contains("node")) {
    *out = Var(a["node"].get<std::string>());
    return Status::Ok();
  }
  bool tup = a.contains("tuple");
  if (tup || a.contains("list")) {
    std::string s = tup ? "(" : "[";
    const json& items = tup ? a["tuple"] : a["list"];
    for (const auto& x : items) {
      std::string e;
      Status st = RenderArg(x, &e);
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
      Status st = RenderArg(v, &e);
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

Status RenderCallArgs(const Node& n, size_t skip, std::string* out) {
  std::string s;
  for (size_t i = skip; i < n.args.size(); ++i) {
    std::string e;
    Status st = RenderArg(n.args[i], &e);
    if (!st.ok()) return st;
    s += (s.empty() ? "" : ", ") + e;
  }
  for (const auto& [k, v] : n.kwargs.items()) {
    std::string e;
    Status st = RenderArg(v, &e);
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

// The flat index into a broadcast input for the group's flat offset `offs`:
// dimensions of the group's shape are classified as broadcast (the input has
// size 1 there), kept (same size) or trivial (size 1), adjacent dimensions of
// the same class are merged, and each kept run contributes
// ((offs // inner) % size) * stride with literal constants, so that the
// compiler turns the divisions into multiplications.
std::string BroadcastIndex(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& shape) {
  const size_t rank = shape.size();
  std::vector<int64_t> s(rank, 1);
  for (size_t i = 0; i < in_shape.size(); ++i) s[rank - in_shape.size() + i] = in_shape[i];
  // Runs of kept dimensions, each as (inner, size, stride in the contiguous input).
  struct Run { int64_t inner, size, stride; };
  std::vector<Run> runs;
  int64_t inner = 1, in_stride = 1;
  bool in_run = false;
  for (size_t k = rank; k-- > 0;) {
    if (shape[k] == 1) continue;  // trivial: neither breaks nor extends a run
    bool kept = s[k] == shape[k];
    if (kept) {
      if (in_run) {
        runs.back().size *= shape[k];
      } else {
        runs.push_back({inner, shape[k], in_stride});
        in_run = true;
      }
      in_stride *= shape[k];
    } else {
      in_run = false;
    }
    inner *= shape[k];
  }
  if (runs.empty()) return "offs * 0";  // a single value, loaded as a block
  std::string e;
  const int64_t total = inner;
  for (const auto& r : runs) {
    std::string t = "offs";
    if (r.inner != 1) t = "(" + t + " // " + std::to_string(r.inner) + ")";
    if (r.inner * r.size != total) t = "(" + t + " % " + std::to_string(r.size) + ")";
    if (r.stride != 1) t = t + " * " + std::to_string(r.stride);
    e += (e.empty() ? "" : " + ") + t;
  }
  return e;
}

// The position of grp's first tensor input; grp.inputs.size() when it has none.
size_t FirstTensorInput(const Graph& g, const Group& grp) {
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    if (!g.Find(grp.inputs[i])->is_number) return i;
  }
  return grp.inputs.size();
}

}  // namespace

Status RenderGroupOps(const Graph& g, const Group& grp, PyWriter* w, std::map<std::string, std::string>* names) {
  for (int idx : grp.nodes) {
    const EwOp& op = grp.ops.at(idx);
    std::vector<std::string> a;
    for (const auto& o : op.operands) a.push_back(o.node.empty() ? PyFloat(o.value) : names->at(o.node));
    std::string e;
    Status st = RenderEw(op, a, &e);
    if (!st.ok()) return st;
    std::string v = "t_" + g.nodes[idx].name;
    w->Line(v + " = " + e);
    (*names)[g.nodes[idx].name] = v;
  }
  return Status::Ok();
}

void InputPrelude(PyWriter* w, const Node& in, size_t i, const std::string& prefix) {
  const std::string v = prefix + std::to_string(i);
  if (in.is_number) {
    w->Line(v + " = float(" + v + ")");
    return;
  }
  w->Line("assert list(" + v + ".shape) == " + PyShape(in.shape) + ", \"the kernel was generated for the traced shapes\"");
  w->Line(v + " = " + v + ".contiguous()");
}

// A kernel line loading tensor input i of grp into var at the group's flat
// index `offs` (a broadcast input through its merged index).
void InputLoad(PyWriter* w, const Node& in, const Group& grp, size_t i, const std::string& var, const std::string& mask,
               const std::string& prefix) {
  const std::string addr = in.shape != grp.shape ? "(" + BroadcastIndex(in.shape, grp.shape) + ")" : "offs";
  w->Line(var + " = tl.load(" + prefix + std::to_string(i) + " + " + addr + ", mask=" + mask + ", other=0.0).to(tl.float32)");
}

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

Status MakePrologue(const Graph& g, const Group& grp, ReductionPrologue* out) {
  if (grp.outputs.size() != 1) return Status::Error("a prologue has one output");
  Status st = RenderPrologue(g, grp, grp.outputs, out);
  if (!st.ok()) return st;
  out->load = [loads = out->lines, result = out->results[0]](const std::string& other) {
    return loads + "v = tl.where(m, " + result + ", " + other + ")\n";
  };
  return Status::Ok();
}

// One kernel and its launcher for group k. The kernel is specialised to the
// traced shapes (KernelBench tasks have fixed shapes); the launcher checks them.
Status EmitGroup(const Graph& g, const Group& grp, size_t k, const KernelSchedule& ks,
                 const std::map<size_t, NormFeed>& feeds, std::string* kernels) {
  const size_t first_tensor = FirstTensorInput(g, grp);
  if (first_tensor == grp.inputs.size()) return Status::Error("a kernel without tensor inputs");
  for (const auto& [i, f] : feeds) {
    if (g.Find(grp.inputs[i])->shape != grp.shape || f.op.in_shape != grp.shape) {
      return Status::Error("a norm applied in a kernel of another shape");
    }
  }
  const bool small = grp.numel() < kInt32Elements;
  auto join = [](const std::vector<std::string>& v, const std::string& sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
  };

  const std::string kname = "_ax_kernel" + std::to_string(k);
  std::vector<std::string> params;  // the kernel's runtime arguments
  std::vector<std::string> consts;  // and its constexpr ones (norm feeds: HAS_B<i>)
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    const std::string si = std::to_string(i);
    if (feeds.count(i)) {
      for (const char* p : {"x", "mean", "var", "w", "b"}) params.push_back(p + si);
      consts.push_back("HAS_B" + si);
    } else {
      params.push_back("in" + si);
    }
  }
  std::vector<std::string> outs;
  for (size_t i = 0; i < grp.outputs.size(); ++i) outs.push_back("out" + std::to_string(i));
  params.insert(params.end(), outs.begin(), outs.end());
  params.push_back("n");

  PyWriter kr;
  kr.Line("@triton.jit");
  {
    std::string sig;
    for (const auto& p : params) sig += p + ", ";
    for (const auto& c : consts) sig += c + ": tl.constexpr, ";
    auto body = kr.Open("def " + kname + "(" + sig + "BLOCK: tl.constexpr):");
    std::vector<std::string> fns;
    for (int idx : grp.nodes) fns.push_back(grp.ops.at(idx).fn);
    kr.Line("# ops: " + join(fns, ", ") + "; shape " + PyShape(grp.shape));
    kr.Line(small ? "offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)"
                  : "offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)");
    kr.Line("mask = offs < n");
    std::map<std::string, std::string> names;  // node -> kernel variable
    for (size_t i = 0; i < grp.inputs.size(); ++i) {
      const std::string si = std::to_string(i);
      if (auto f = feeds.find(i); f != feeds.end()) {
        kr.Line("# " + grp.inputs[i] + ": " + f->second.op.norm_class + " applied here");
        kr.Text(NormApplyLines(f->second.op, si));
        names[grp.inputs[i]] = "y" + si;
        continue;
      }
      const Node& in = *g.Find(grp.inputs[i]);
      names[grp.inputs[i]] = in.is_number ? "in" + si : "x" + si;  // a number is a float32 argument
      if (!in.is_number) InputLoad(&kr, in, grp, i, "x" + si, "mask");
    }
    Status st = RenderGroupOps(g, grp, &kr, &names);
    if (!st.ok()) return st;
    for (size_t i = 0; i < grp.outputs.size(); ++i) {
      kr.Line("tl.store(out" + std::to_string(i) + " + offs, " + names.at(grp.outputs[i]) + ", mask=mask)");
    }
  }

  // The launcher: inputs are made contiguous (a no-op when they are), and
  // their shapes must be the traced ones the kernel was specialised to.
  // A norm feed takes the norm's input and module instead of its output.
  PyWriter ln;
  {
    std::vector<std::string> args;
    for (size_t i = 0; i < grp.inputs.size(); ++i) {
      args.push_back("in" + std::to_string(i) + (feeds.count(i) ? ", mod" + std::to_string(i) : ""));
    }
    auto body = ln.Open("def _ax_launch" + std::to_string(k) + "(" + join(args, ", ") + "):");
    for (size_t i = 0; i < grp.inputs.size(); ++i) {
      const Node& in = *g.Find(grp.inputs[i]);
      const std::string si = std::to_string(i);
      auto f = feeds.find(i);
      if (f == feeds.end()) {
        InputPrelude(&ln, in, i);
        continue;
      }
      ln.Line("assert list(in" + si + ".shape) == " + PyShape(in.shape) +
              ", \"the kernel was generated for the traced shapes\"");
      ln.Line("x" + si + ", mean" + si + ", var" + si + ", w" + si + ", b" + si + ", HAS_B" + si + " = _ax_red" +
              std::to_string(f->second.k_red) + "_stats(in" + si + ", mod" + si + ")");
      ln.Line("in" + si + " = x" + si);
    }
    for (const auto& o : outs) {
      ln.Line(o + " = torch.empty(" + PyShape(grp.shape) + ", device=in" + std::to_string(first_tensor) +
              ".device, dtype=" + grp.dtype + ")");
    }
    ln.Line("n = out0.numel()");
    {
      auto empty = ln.Open("if n == 0:");
      ln.Line("return " + join(outs, ", "));
    }
    ln.Line("BLOCK = " + std::to_string(ks.block));
    std::string call = kname + "[(triton.cdiv(n, BLOCK),)](";
    for (const auto& p : params) call += p + ", ";
    for (const auto& c : consts) call += c + "=" + c + ", ";
    ln.Line(call + "BLOCK=BLOCK, num_warps=" + std::to_string(ks.warps) + ")");
    ln.Line("return " + join(outs, ", "));
  }
  *kernels += kr.str() + "\n\n" + ln.str() + "\n\n";
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
  std::ostringstream ln;
  ln << "def _ax_linred" << k << "(x, mod";
  for (size_t i = 0; i < lr.operands.size(); ++i) ln << ", c" << i;
  ln << "):\n";
  ln << "    # " << op.kind << " over the " << gm.N << " output features of a Linear"
     << (lr.chain.empty() ? "" : " through an affine chain")
     << ": x . (sum_n W_n) + sum_n b_n, then the chain on the sum (no matrix product)\n";
  ln << "    assert list(x.shape) == " << PyShape(gm.in_shape) << ", \"the kernel was generated for the traced shapes\"\n";
  ln << "    s = torch.mv(x.reshape(" << gm.M << ", " << gm.K << "), mod.weight.sum(0))\n";
  if (gm.has_bias) ln << "    s = s + mod.bias.sum()\n";
  for (const auto& [kind, c] : lr.steps) {
    // the sum over the features of the other operand broadcast to [.., N]
    std::string cv, csum;
    if (c.node.empty()) {
      cv = PyFloat(c.value);
      csum = PyFloat(c.value) + " * " + std::to_string(gm.N);
    } else {
      const size_t pos = std::find(lr.operands.begin(), lr.operands.end(), c.node) - lr.operands.begin();
      const Node& cn = *g.Find(c.node);
      cv = "c" + std::to_string(pos);
      if (cn.is_number) {
        cv = "float(" + cv + ")";
        csum = cv + " * " + std::to_string(gm.N);
      } else {
        const bool per_feature = !cn.shape.empty() && cn.shape.back() == gm.N;
        cv = cv + ".reshape(())";
        csum = per_feature ? "c" + std::to_string(pos) + ".sum()" : cv + " * " + std::to_string(gm.N);
      }
    }
    if (kind == "add") ln << "    s = s + " << csum << "\n";
    else if (kind == "sub") ln << "    s = s - " << csum << "\n";
    else if (kind == "rsub") ln << "    s = " << csum << " - s\n";
    else if (kind == "mul") ln << "    s = s * " << cv << "\n";
    else ln << "    s = s / " << cv << "\n";
  }
  if (op.kind == "mean") ln << "    s = s / " << gm.N << "\n";
  ln << "    return s.reshape(" << PyShape(op.out_shape) << ")\n\n\n";
  return ln.str();
}

// The launcher's second argument: the Linear module or the other matrix.
// A convolution's: its weight and bias (a module's, or a functional one's nodes).
std::string GemmSecond(const GemmOp& op) {
  if (op.IsConv() && !op.module.empty()) return AttrExpr(op.module) + ".weight, " + AttrExpr(op.module) + ".bias";
  if (op.IsConv()) return Var(op.weight) + ", " + (op.bias.empty() ? "None" : Var(op.bias));
  return op.module.empty() ? Var(op.other) : AttrExpr(op.module);
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

}  // namespace

Status Generate(const Graph& g, const std::string& task_source, const Plan& plan, std::string* source,
                int* kernels, Plan* resolved) {
  const FusedSchedule s = Schedule(g, plan);
  if (s.groups.empty() && s.reds.empty() && s.gemms.empty() && s.rnorms.empty() && s.attns.empty()) {
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
  std::map<int, size_t> red_of, gemm_of, rnorm_of, attn_of;  // node -> its index
  std::set<std::string> absorbed;  // nodes a reduction replaces (max/min before [0])
  for (size_t k = 0; k < reds.size(); ++k) {
    red_of[reds[k].first] = k;
    absorbed.insert(reds[k].second.absorbed.begin(), reds[k].second.absorbed.end());
  }
  for (size_t k = 0; k < gemms.size(); ++k) gemm_of[gemms[k].first] = k;
  for (size_t k = 0; k < rnorms.size(); ++k) rnorm_of[rnorms[k].first] = k;
  for (size_t k = 0; k < s.attns.size(); ++k) attn_of[s.attns[k].first] = k;
  std::map<int, size_t> last_of;  // the last node of a group -> the group
  std::set<int> fused;
  for (size_t k = 0; k < groups.size(); ++k) {
    last_of[groups[k].nodes.back()] = k;
    fused.insert(groups[k].nodes.begin(), groups[k].nodes.end());
  }

  // The kernels, in the schedule's order.
  std::string kernel_src;
  std::map<size_t, std::vector<std::string>> sib_inputs;  // leader -> its launcher's inputs
  for (const FusedKernel& fk : s.kernels) {
    const size_t k = fk.index;
    Status st;
    switch (fk.kind) {
      case KernelKind::kPointwise:
        st = EmitGroup(g, groups[k], k, written.For(k), feeds[k], &kernel_src);
        break;
      case KernelKind::kRowNorm:
        st = EmitRowNorm(rnorms[k].second, k, written.nsched[k], &kernel_src);
        break;
      case KernelKind::kGemm:
      case KernelKind::kConvolution:
        st = EmitGemm(g, g.nodes[gemms[k].first], gemms[k].second, k, written.GemmFor(k),
                      fk.epilogue.empty() ? nullptr : &groups[fk.epilogue.front()], &kernel_src);
        break;
      case KernelKind::kAttention:
        st = EmitAttention(s.attns[k].second, k, written.asched[k], &kernel_src);
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

  std::vector<std::string> params;
  std::string first_tensor;  // the first tensor input: where constants are rebuilt
  // The forward's statements, at the depth of `def forward`'s body.
  PyWriter fwd(2);
  std::ostringstream body;  // the statement being written
  auto end_statement = [&] {
    fwd.Line(body.str());
    body.str("");
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string v = Var(n.name);
    if (n.op == "placeholder") {
      if (!IsIdent(n.target)) return Status::Error("forward takes variadic arguments (" + n.target + ")");
      params.push_back(v);
      if (first_tensor.empty() && n.is_tensor) first_tensor = v;
      continue;
    }
    if (auto it = last_of.find(static_cast<int>(i)); it != last_of.end()) {
      const Group& grp = groups[it->second];
      if (auto ge = gemm_of_group.find(it->second); ge != gemm_of_group.end()) {
        // the GEMM it reads runs it as its epilogue, launched here
        const size_t gk = ge->second;
        const Node& lin = g.nodes[gemms[gk].first];
        for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j]);
        body << " = _ax_gemm" << gk << "(" << Var(gemms[gk].second.input) << ", " << GemmSecond(gemms[gk].second);
        for (const auto& in : grp.inputs) {
          if (in != lin.name) body << ", " << Var(in);
        }
        body << ")";
        end_statement();
        continue;
      }
      if (auto e = epi_of_group.find(it->second); e != epi_of_group.end()) {
        // run by the reduction it reads, launched here
        std::set<std::string> skip_in = {g.nodes[reds[e->second].first].name};
        if (const RedEpi& re = epi_of.at(e->second); re.has_pre()) {
          skip_in.insert(groups[re.pre].outputs.begin(), groups[re.pre].outputs.end());
        }
        for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j]);
        body << " = _ax_red" << e->second << "(";
        if (auto p = prologue_of.find(e->second); p != prologue_of.end()) {
          const Group& pg = groups[p->second];
          for (size_t j = 0; j < pg.inputs.size(); ++j) body << (j ? ", " : "") << Var(pg.inputs[j]);
        } else {
          body << Var(reds[e->second].second.input);
        }
        for (const auto& in : grp.inputs) {
          if (!skip_in.count(in)) body << ", " << Var(in);
        }
        body << ")";
        end_statement();
        continue;
      }
      if (inside.count(it->second)) continue;  // computed by the reduction that reads it
      for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j]);
      body << " = _ax_launch" << it->second << "(";
      for (size_t j = 0; j < grp.inputs.size(); ++j) {
        body << (j ? ", " : "");
        if (auto f = feeds[it->second].find(j); f != feeds[it->second].end()) {
          body << Var(f->second.op.input) << ", " << AttrExpr(f->second.op.module);
        } else {
          body << Var(grp.inputs[j]);
        }
      }
      body << ")";
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
    if (auto it = rnorm_of.find(static_cast<int>(i)); it != rnorm_of.end()) {
      const RowNormOp& op = rnorms[it->second].second;
      body << v << " = _ax_rnorm" << it->second << "(" << Var(op.input);
      if (op.weight == RowNormOp::Weight::kNode) body << ", " << Var(op.weight_ref);
      if (op.weight == RowNormOp::Weight::kModule) body << ", " << AttrExpr(op.weight_ref) << ".weight";
      body << ")";
      end_statement();
      continue;
    }
    if (auto it = attn_of.find(static_cast<int>(i)); it != attn_of.end()) {
      const AttentionOp& op = s.attns[it->second].second;
      body << v << " = _ax_attn" << it->second << "(" << Var(op.q) << ", " << Var(op.k) << ", " << Var(op.v)
           << (op.mask.empty() ? "" : ", " + Var(op.mask)) << ")";
      end_statement();
      continue;
    }
    if (auto it = gemm_of.find(static_cast<int>(i)); it != gemm_of.end()) {
      if (epilogue_of.count(it->second)) continue;  // launched with its epilogue
      const GemmOp& op = gemms[it->second].second;
      body << v << " = _ax_gemm" << it->second << "(" << Var(op.input) << ", " << GemmSecond(op) << ")";
      end_statement();
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && linred_of.count(it->second)) {
      const LinearReduce& lr = s.linreds[linred_of.at(it->second)];
      body << v << " = _ax_linred" << linred_of.at(it->second) << "(" << Var(lr.gemm.input) << ", "
           << AttrExpr(lr.gemm.module);
      for (const auto& o : lr.operands) body << ", " << Var(o);
      body << ")";
      end_statement();
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && epi_of.count(it->second)) {
      continue;  // computed inside the kernel of the group that reads it
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && follower.count(it->second)) {
      continue;  // computed with its sibling reductions, at the first of them
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && sib_of.count(it->second)) {
      body << v;
      for (size_t m : sib_of.at(it->second)) body << ", " << Var(g.nodes[reds[m].first].name);
      body << " = _ax_red" << it->second << "(";
      const auto& ins = sib_inputs.at(it->second);
      for (size_t j = 0; j < ins.size(); ++j) body << (j ? ", " : "") << Var(ins[j]);
      body << ")";
      end_statement();
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end()) {
      const RedOp& op = reds[it->second].second;
      body << v << " = _ax_red" << it->second << "(";
      if (auto p = prologue_of.find(it->second); p != prologue_of.end()) {
        const Group& grp = groups[p->second];
        for (size_t j = 0; j < grp.inputs.size(); ++j) body << (j ? ", " : "") << Var(grp.inputs[j]);
      } else {
        body << Var(op.input);
      }
      if (op.kind == "norm") body << ", " << AttrExpr(op.module);
      if (op.kind == "xent") body << ", " << Var(op.target);
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
      st = RenderCallArgs(n, 0, &args);
      if (!st.ok()) return st;
      body << v << " = " << AttrExpr(n.target) << "(" << args << ")";
      end_statement();
    } else if (n.op == "call_function") {
      if (n.callable.empty()) return Status::Error("no Python name for function " + n.target);
      st = RenderCallArgs(n, 0, &args);
      if (!st.ok()) return st;
      body << v << " = " << n.callable << "(" << args << ")";
      end_statement();
    } else if (n.op == "call_method") {
      if (n.args.empty() || !IsIdent(n.target)) return Status::Error("malformed method call " + n.name);
      std::string self;
      st = RenderArg(n.args[0], &self);
      if (!st.ok()) return st;
      st = RenderCallArgs(n, 1, &args);
      if (!st.ok()) return st;
      body << v << " = " << self << "." << n.target << "(" << args << ")";
      end_statement();
    } else if (n.op == "output") {
      if (n.args.empty()) return Status::Error("output node without a value");
      st = RenderArg(n.args[0], &args);
      if (!st.ok()) return st;
      body << "return " << args;
      end_statement();
    } else {
      return Status::Error("unknown node kind " + n.op);
    }
  }

  std::ostringstream out;
  out << "# Generated by adaexplore's builtin compiler: the task's own source, Triton kernels\n"
      << "# for the fused elementwise operators, and ModelNew(Model) overriding forward.\n"
      << kPlanMarker << written.ToJson().dump() << "\n\n";
  out << task_source;
  if (!task_source.empty() && task_source.back() != '\n') out << "\n";
  out << "\n\n# ---- adaexplore builtin kernels ----\n"
      << "import builtins\nimport math\nimport operator\n\nimport torch\nimport triton\nimport triton.language as tl\n\n\n";
  if (kernel_src.find("_ax_coop_launch(") != std::string::npos) out << CoopLaunchHelper();
  if (kernel_src.find("_ax_nanmax(") != std::string::npos || kernel_src.find("_ax_nanmin(") != std::string::npos) {
    out << NanMinMaxHelpers();
  }
  if (plan.cuda_graph) out << CudaGraphHelper();
  out << kernel_src;
  std::string plist, args;  // ", a, b" after self; "a, b," as a tuple's items
  for (const auto& p : params) plist += ", " + p, args += p + ", ";
  out << "class ModelNew(Model):\n";
  if (plan.cuda_graph) {
    // forward replays _ax_forward, the generated forward, from a CUDA graph
    if (params.size() > 1) args.resize(args.size() - 2);
    else if (params.size() == 1) args.pop_back();
    out << "    def forward(self" << plist << "):\n"
        << "        return _ax_graphed(self, self._ax_forward, (" << args << "))\n\n"
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

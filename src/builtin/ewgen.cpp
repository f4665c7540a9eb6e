// The elementwise generator: a group's inputs checked in its launcher and
// loaded in its kernel (broadcast inputs through merged indices), its
// operators from the registry, and the pointwise kernel and launcher of a
// group (with norms applied in it where the plan feeds them).
#include "builtin/ewgen.h"

#include <map>
#include <string>
#include <vector>

#include "builtin/ew_ops.h"
#include "builtin/reduce.h"

namespace ax::builtin {

namespace {

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

}  // namespace

void OutputPrelude(PyWriter* w, const std::string& o, size_t i, const std::vector<int64_t>& shape,
                   const std::string& device, const std::string& dtype, const StoreRemaps* remaps) {
  if (!RemapOf(remaps, i)) {
    w->Line(o + " = torch.empty(" + PyShape(shape) + ", device=" + device + ", dtype=" + dtype + ")");
    return;
  }
  const std::string d = "dst" + std::to_string(i);
  w->Line("assert list(" + d + ".shape) == " + PyShape(shape) + " and " + d + ".dtype == " + dtype +
          ", \"a slice of the concatenation\"");
  w->Line(o + " = " + d + "  # stored into its slice of the concatenation");
}

std::string DstParams(const StoreRemaps* remaps) {
  std::string s;
  for (const auto& [i, r] : remaps ? *remaps : StoreRemaps()) s += ", dst" + std::to_string(i);
  return s;
}

size_t FirstTensorInput(const Graph& g, const Group& grp) {
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    if (!g.Find(grp.inputs[i])->is_number) return i;
  }
  return grp.inputs.size();
}

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


// One kernel and its launcher for group k. The kernel is specialised to the
// traced shapes (KernelBench tasks have fixed shapes); the launcher checks them.
Status EmitGroup(const Graph& g, const Group& grp, size_t k, const KernelSchedule& ks,
                 const std::map<size_t, NormFeed>& feeds, std::string* kernels, const StoreRemaps* remaps) {
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
      kr.Line("tl.store(out" + std::to_string(i) + " + " + StoreIndex("offs", RemapOf(remaps, i)) + ", " +
              names.at(grp.outputs[i]) + ", mask=mask)");
    }
  }

  // The launcher: inputs are made contiguous (a no-op when they are), and
  // their shapes must be the traced ones the kernel was specialised to.
  // A norm feed takes the norm's input and module instead of its output.
  PyWriter ln;
  {
    std::vector<std::string> args;
    for (size_t i = 0; i < grp.inputs.size(); ++i) {
      const auto f = feeds.find(i);
      const std::string si = std::to_string(i);
      args.push_back("in" + si + (f == feeds.end() ? "" : ", mod" + si + (f->second.stats_in ? ", st" + si : "")));
    }
    auto body = ln.Open("def _ax_launch" + std::to_string(k) + "(" + join(args, ", ") + DstParams(remaps) + "):");
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
              std::to_string(f->second.k_red) + "_stats(in" + si + ", mod" + si + (f->second.stats_in ? ", st" + si : "") +
              ")");
      ln.Line("in" + si + " = x" + si);
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      OutputPrelude(&ln, outs[i], i, grp.shape, "in" + std::to_string(first_tensor) + ".device", grp.dtype, remaps);
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


}  // namespace ax::builtin

#include "builtin/codegen.h"

#include "builtin/ewgen.h"
#include "builtin/conv.h"
#include "builtin/ew_ops.h"
#include "builtin/gemm.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace ax::builtin {

using json = nlohmann::json;

FusionOptions Plan::Fusion() const {
  FusionOptions o;
  o.singleton = singleton;
  o.cuts.insert(cuts.begin(), cuts.end());
  return o;
}

json Plan::ToJson() const {
  json s = json::array();
  for (const auto& k : sched) s.push_back({k.block, k.warps});
  json j = {{"v", 1}, {"singleton", singleton}, {"cuts", cuts}, {"sched", s}};
  if (library_reductions) j["libred"] = true;
  if (norm_epilogue) j["normepi"] = true;
  if (reduce_prologue) j["prologue"] = true;
  if (red_epilogue) j["redepi"] = true;
  if (siblings) j["siblings"] = true;
  if (algebra) j["algebra"] = true;
  if (gemm) {
    json gs = json::array();
    for (const auto& k : gsched) gs.push_back({k.bm, k.bn, k.bk, k.group_m, k.warps, k.stages});
    j["gemm"] = gs;
    if (conv) j["conv"] = true;
  }
  if (!nsched.empty()) {
    json r = json::array();
    for (const auto& k : nsched) r.push_back(k.ToJson());
    j["rownorm"] = r;
  }
  if (!red.empty()) {
    json r = json::array();
    for (const auto& k : red) {
      json e = {k.block_r, k.block_m, k.warps, k.split};
      if (k.coop != 0 || k.lag != 0) e.push_back(k.coop);
      if (k.lag != 0) e.push_back(k.lag);
      r.push_back(e);
    }
    j["red"] = r;
  }
  return j;
}

Status Plan::FromJson(const json& j, Plan* out) {
  try {
    Plan p;
    if (j.value("v", 0) != 1) return Status::Error("unknown plan version");
    p.singleton = j.value("singleton", false);
    p.cuts = j.value("cuts", std::vector<std::string>{});
    for (const auto& k : j.value("sched", json::array())) {
      KernelSchedule s;
      s.block = k.at(0).get<int>();
      s.warps = k.at(1).get<int>();
      if (s.block < 16 || (s.block & (s.block - 1)) || s.warps < 1 || s.warps > 32) {
        return Status::Error("plan has a bad schedule");
      }
      p.sched.push_back(s);
    }
    p.library_reductions = j.value("libred", false);
    p.norm_epilogue = j.value("normepi", false);
    p.reduce_prologue = j.value("prologue", false);
    p.red_epilogue = j.value("redepi", false);
    p.siblings = j.value("siblings", false);
    p.algebra = j.value("algebra", false);
    if (j.contains("gemm")) {
      p.gemm = true;
      for (const auto& k : j.at("gemm")) {
        GemmSchedule gs{k.at(0).get<int>(), k.at(1).get<int>(), k.at(2).get<int>(),
                        k.at(3).get<int>(), k.at(4).get<int>(), k.at(5).get<int>()};
        if (!gs.Valid()) return Status::Error("plan has a bad GEMM schedule");
        p.gsched.push_back(gs);
      }
      p.conv = j.value("conv", false);
    }
    for (const auto& k : j.value("rownorm", json::array())) {
      RowNormSchedule r;
      if (Status s = RowNormSchedule::FromJson(k, &r); !s.ok()) return s;
      p.nsched.push_back(r);
    }
    for (const auto& k : j.value("red", json::array())) {
      RedSchedule r{k.at(0).get<int>(), k.at(1).get<int>(), k.at(2).get<int>(), k.at(3).get<int>(),
                    k.size() > 4 ? k.at(4).get<int>() : 0, k.size() > 5 ? k.at(5).get<int>() : 0};
      auto pow2_or_auto = [](int v) { return v == 0 || (v > 0 && v <= 65536 && (v & (v - 1)) == 0); };
      if (!pow2_or_auto(r.block_r) || !pow2_or_auto(r.block_m) || r.warps < 0 || r.warps > 32 || r.split < 0 ||
          r.split > 4096 || r.coop < -1 || r.coop > 32 || r.lag < -1 || r.lag > 2) {
        return Status::Error("plan has a bad reduction schedule");
      }
      p.red.push_back(r);
    }
    *out = std::move(p);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(std::string("malformed plan: ") + e.what());
  }
}

Status ParsePlanMarker(const std::string& source, Plan* out) {
  size_t pos = source.find(kPlanMarker);
  if (pos == std::string::npos) return Status::Error("no plan marker in the source");
  pos += std::string(kPlanMarker).size();
  size_t end = source.find('\n', pos);
  std::string text = source.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Error("the plan marker is not JSON");
  return Plan::FromJson(j, out);
}

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

// One kernel and its launcher for group k. The kernel is specialised to the
// traced shapes (KernelBench tasks have fixed shapes); the launcher checks them.
// A group input that is the output of norm reduction `red` (index k_red),
// applied inside the group's kernel from the norm's input and statistics.
struct NormFeed {
  size_t k_red = 0;
  const RedOp* op = nullptr;
};

// The position of grp's first tensor input; grp.inputs.size() when it has none.
size_t FirstTensorInput(const Graph& g, const Group& grp) {
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    if (!g.Find(grp.inputs[i])->is_number) return i;
  }
  return grp.inputs.size();
}

}  // namespace

Status RenderGroupOps(const Graph& g, const Group& grp, const std::string& indent,
                      std::map<std::string, std::string>* names, std::string* lines) {
  for (int idx : grp.nodes) {
    const EwOp& op = grp.ops.at(idx);
    std::vector<std::string> a;
    for (const auto& o : op.operands) a.push_back(o.node.empty() ? PyFloat(o.value) : names->at(o.node));
    std::string e;
    Status st = RenderEw(op, a, &e);
    if (!st.ok()) return st;
    std::string v = "t_" + g.nodes[idx].name;
    *lines += indent + v + " = " + e + "\n";
    (*names)[g.nodes[idx].name] = v;
  }
  return Status::Ok();
}

std::string InputPrelude(const Node& in, size_t i, const std::string& prefix) {
  const std::string v = prefix + std::to_string(i);
  if (in.is_number) return "    " + v + " = float(" + v + ")\n";
  return "    assert list(" + v + ".shape) == " + PyShape(in.shape) +
         ", \"the kernel was generated for the traced shapes\"\n    " + v + " = " + v + ".contiguous()\n";
}

// A kernel line loading tensor input i of grp into var at the group's flat
// index `offs` (a broadcast input through its merged index).
std::string InputLoad(const Node& in, const Group& grp, size_t i, const std::string& var, const std::string& mask,
                      const std::string& indent, const std::string& prefix) {
  const std::string addr = in.shape != grp.shape ? "(" + BroadcastIndex(in.shape, grp.shape) + ")" : "offs";
  return indent + var + " = tl.load(" + prefix + std::to_string(i) + " + " + addr + ", mask=" + mask +
         ", other=0.0).to(tl.float32)\n";
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
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    const std::string si = std::to_string(i);
    const Node& in = *g.Find(grp.inputs[i]);
    p.params.push_back("in" + si);
    p.head += InputPrelude(in, i);
    names[grp.inputs[i]] = in.is_number ? "in" + si : "pin" + si;
    if (!in.is_number) p.lines += InputLoad(in, grp, i, "pin" + si, "m", "        ");
    if (!in.is_number && in.shape == grp.shape) p.loaded[grp.inputs[i]] = "pin" + si;
  }
  Status st = RenderGroupOps(g, grp, "        ", &names, &p.lines);
  if (!st.ok()) return st;
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
    return loads + "        v = tl.where(m, " + result + ", " + other + ")\n";
  };
  return Status::Ok();
}

Status EmitGroup(const Graph& g, const Group& grp, size_t k, const KernelSchedule& ks,
                 const std::map<size_t, NormFeed>& feeds, std::string* kernels) {
  const size_t first_tensor = FirstTensorInput(g, grp);
  if (first_tensor == grp.inputs.size()) return Status::Error("a kernel without tensor inputs");
  for (const auto& [i, f] : feeds) {
    if (g.Find(grp.inputs[i])->shape != grp.shape || f.op->in_shape != grp.shape) {
      return Status::Error("a norm applied in a kernel of another shape");
    }
  }
  const bool small = grp.numel() < kInt32Elements;

  std::ostringstream kr, ln;
  std::string kname = "_ax_kernel" + std::to_string(k);
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
  for (size_t i = 0; i < grp.outputs.size(); ++i) params.push_back("out" + std::to_string(i));
  params.push_back("n");
  kr << "@triton.jit\ndef " << kname << "(";
  for (const auto& p : params) kr << p << ", ";
  for (const auto& c : consts) kr << c << ": tl.constexpr, ";
  kr << "BLOCK: tl.constexpr):\n";
  kr << "    # ops: ";
  for (size_t j = 0; j < grp.nodes.size(); ++j) kr << (j ? ", " : "") << grp.ops.at(grp.nodes[j]).fn;
  kr << "; shape " << PyShape(grp.shape) << "\n";
  if (small) kr << "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n";
  else kr << "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)\n";
  kr << "    mask = offs < n\n";
  std::map<std::string, std::string> names;  // node -> kernel variable
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    if (auto f = feeds.find(i); f != feeds.end()) {
      kr << "    # " << grp.inputs[i] << ": " << f->second.op->norm_class << " applied here\n";
      kr << NormApplyLines(*f->second.op, std::to_string(i));
      names[grp.inputs[i]] = "y" + std::to_string(i);
      continue;
    }
    const Node& in = *g.Find(grp.inputs[i]);
    const std::string si = std::to_string(i);
    names[grp.inputs[i]] = in.is_number ? "in" + si : "x" + si;  // a number is a float32 argument
    if (!in.is_number) kr << InputLoad(in, grp, i, "x" + si, "mask", "    ");
  }
  std::string ops;
  Status st = RenderGroupOps(g, grp, "    ", &names, &ops);
  if (!st.ok()) return st;
  kr << ops;
  for (size_t i = 0; i < grp.outputs.size(); ++i) {
    kr << "    tl.store(out" << i << " + offs, " << names.at(grp.outputs[i]) << ", mask=mask)\n";
  }

  // The launcher: inputs are made contiguous (a no-op when they are), and
  // their shapes must be the traced ones the kernel was specialised to.
  // A norm feed takes the norm's input and module instead of its output.
  std::string fname = "_ax_launch" + std::to_string(k);
  ln << "def " << fname << "(";
  for (size_t i = 0; i < grp.inputs.size(); ++i) ln << (i ? ", " : "") << "in" << i << (feeds.count(i) ? ", mod" + std::to_string(i) : "");
  ln << "):\n";
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    const Node& in = *g.Find(grp.inputs[i]);
    auto f = feeds.find(i);
    if (f == feeds.end()) {
      ln << InputPrelude(in, i);
    } else {
      const std::string si = std::to_string(i);
      ln << "    assert list(in" << si << ".shape) == " << PyShape(in.shape)
         << ", \"the kernel was generated for the traced shapes\"\n";
      ln << "    x" << si << ", mean" << si << ", var" << si << ", w" << si << ", b" << si << ", HAS_B" << si << " = _ax_red"
         << f->second.k_red << "_stats(in" << si << ", mod" << si << ")\n";
      ln << "    in" << si << " = x" << si << "\n";
    }
  }
  for (size_t i = 0; i < grp.outputs.size(); ++i) {
    ln << "    out" << i << " = torch.empty(" << PyShape(grp.shape) << ", device=in" << first_tensor
       << ".device, dtype=" << grp.dtype << ")\n";
  }
  ln << "    n = out0.numel()\n";
  ln << "    if n == 0:\n        return ";
  for (size_t i = 0; i < grp.outputs.size(); ++i) ln << (i ? ", " : "") << "out" << i;
  ln << "\n";
  ln << "    BLOCK = " << ks.block << "\n";
  ln << "    " << kname << "[(triton.cdiv(n, BLOCK),)](";
  for (const auto& p : params) ln << p << ", ";
  for (const auto& c : consts) ln << c << "=" << c << ", ";
  ln << "BLOCK=BLOCK, num_warps=" << ks.warps << ")\n";
  ln << "    return ";
  for (size_t i = 0; i < grp.outputs.size(); ++i) ln << (i ? ", " : "") << "out" << i;
  ln << "\n";
  *kernels += kr.str() + "\n\n" + ln.str() + "\n\n";
  return Status::Ok();
}

// For each group, the norms it applies itself: a norm whose readers are all
// in one group of the norm's shape. *fed gets the norm nodes.
std::vector<std::map<size_t, NormFeed>> FormFeeds(const Graph& g, const std::vector<Group>& groups,
                                                  const std::vector<std::pair<int, RedOp>>& reds, std::set<int>* fed) {
  std::vector<std::map<size_t, NormFeed>> feeds(groups.size());
  std::map<int, size_t> group_of;
  for (size_t k = 0; k < groups.size(); ++k) {
    for (int idx : groups[k].nodes) group_of[idx] = k;
  }
  for (size_t k = 0; k < reds.size(); ++k) {
    const auto& [ni, op] = reds[k];
    const Node& n = g.nodes[ni];
    if (op.kind != "norm" || n.users.empty() || !group_of.count(n.users[0])) continue;
    const size_t j = group_of.at(n.users[0]);
    bool all_in = true;
    for (int u : n.users) all_in = all_in && group_of.count(u) && group_of.at(u) == j;
    auto pos = std::find(groups[j].inputs.begin(), groups[j].inputs.end(), n.name);
    if (!all_in || pos == groups[j].inputs.end() || groups[j].shape != op.in_shape) continue;
    feeds[j][static_cast<size_t>(pos - groups[j].inputs.begin())] = {k, &op};
    fed->insert(ni);
  }
  return feeds;
}

// For each reduction, the group computed inside its kernel (plan
// reduce_prologue): a group whose one output only that reduction reads, of
// the reduction's input shape, applying no norm itself; a norm that another
// kernel applies (fed) keeps its input.
std::map<size_t, size_t> FormPrologues(const Graph& g, const std::vector<Group>& groups,
                                       const std::vector<std::pair<int, RedOp>>& reds,
                                       const std::vector<std::map<size_t, NormFeed>>& feeds, const std::set<int>& fed,
                                       std::set<size_t> taken = {}) {
  std::map<size_t, size_t> out;
  for (size_t k = 0; k < reds.size(); ++k) {
    const auto& [ni, op] = reds[k];
    if (fed.count(ni)) continue;
    const Node* x = g.Find(op.input);
    // the reader: the reduction itself, or the max/min it absorbs
    const int reader = op.absorbed.empty() ? ni : g.index.at(op.absorbed.front());
    if (!x || x->users.size() != 1 || x->users[0] != reader) continue;
    for (size_t j = 0; j < groups.size(); ++j) {
      const Group& grp = groups[j];
      if (grp.outputs.size() != 1 || grp.outputs[0] != op.input || grp.shape != op.in_shape) continue;
      if (!feeds[j].empty() || taken.count(j)) continue;
      out[k] = j;
      taken.insert(j);
      break;
    }
  }
  return out;
}

// For each reduction, the group run as its epilogue (plan red_epilogue): a
// sum, mean, max or min (no prologue, not rewritten away) whose value only
// that group reads, the group of the reduction's input shape, applying no
// norm, reading the value broadcast back over exactly the reduced dimensions
// (so the value at a flat index is its row's); and rows that suit it
// (EpilogueFits).
struct RedEpi {
  size_t main = 0;                     // the group of the reduction's input shape
  size_t pre = static_cast<size_t>(-1);  // a group of the value's shape between them, or none
  bool has_pre() const { return pre != static_cast<size_t>(-1); }
};

std::map<size_t, RedEpi> FormRedEpilogues(const Graph& g, const std::vector<Group>& groups,
                                          const std::vector<std::pair<int, RedOp>>& reds,
                                          const std::vector<std::map<size_t, NormFeed>>& feeds,
                                          const std::set<size_t>& taken, const std::set<size_t>& skip_reds,
                                          const std::vector<RedSchedule>& want) {
  std::map<size_t, RedEpi> out;
  std::map<int, size_t> group_of;
  for (size_t j = 0; j < groups.size(); ++j) {
    for (int idx : groups[j].nodes) group_of[idx] = j;
  }
  std::set<size_t> used = taken;
  for (size_t k = 0; k < reds.size(); ++k) {
    const auto& [ni, op] = reds[k];
    if (skip_reds.count(k)) continue;
    if (op.kind != "sum" && op.kind != "mean" && op.kind != "amax" && op.kind != "amin") continue;
    if (!EpilogueFits(op, k < want.size() ? want[k] : RedSchedule())) continue;
    const Node& rn = g.nodes[ni];
    // the one group that reads the nodes in `names`, or -1
    auto reader = [&](const std::vector<std::string>& names) -> long {
      long j = -1;
      for (const auto& nm : names) {
        const Node* n = g.Find(nm);
        if (!n || n->users.empty()) return -1;
        for (int u : n->users) {
          auto f = group_of.find(u);
          if (f == group_of.end() || (j >= 0 && static_cast<size_t>(j) != f->second)) return -1;
          j = static_cast<long>(f->second);
        }
      }
      return j;
    };
    long jr = reader({rn.name});
    if (jr < 0) continue;
    RedEpi e;
    if (groups[jr].shape == rn.shape && groups[jr].inputs == std::vector<std::string>{rn.name}) {
      // work on the value alone first (sqrt(mean + eps)), then the main group
      e.pre = static_cast<size_t>(jr);
      jr = reader(groups[jr].outputs);
      if (jr < 0 || static_cast<size_t>(jr) == e.pre || used.count(e.pre) || !feeds[e.pre].empty()) continue;
    }
    const size_t j = static_cast<size_t>(jr);
    e.main = j;
    const Group& grp = groups[j];
    if (used.count(j) || !feeds[j].empty() || grp.shape != op.in_shape) continue;
    // the value, left-padded to the group's rank: 1 over the reduced
    // dimensions, the input's size over the kept ones
    std::vector<int64_t> pad(grp.shape.size() - std::min(grp.shape.size(), rn.shape.size()), 1);
    pad.insert(pad.end(), rn.shape.begin(), rn.shape.end());
    if (pad.size() != grp.shape.size()) continue;
    int64_t kept = 1, reduced = 1;
    bool aligned = true;
    for (size_t d = 0; d < pad.size(); ++d) {
      if (pad[d] == grp.shape[d]) kept *= pad[d];
      else if (pad[d] == 1) reduced *= grp.shape[d];
      else aligned = false;
    }
    if (!aligned || kept != op.geo.rows || reduced != op.geo.R) continue;
    out[k] = e;
    used.insert(j);
    if (e.has_pre()) used.insert(e.pre);
  }
  return out;
}

// Group grp as the epilogue of the reduction whose value is node `value`,
// after group pre (on the value alone, computed once per row) when given.
Status MakeRedEpilogue(const Graph& g, const Group* pre, const Group& grp, const std::string& value,
                       const std::map<std::string, std::string>& loaded, ReductionEpilogue* out) {
  ReductionEpilogue e;
  std::map<std::string, std::string> base = {{value, "red2"}};
  if (pre) {
    std::string once;
    Status st = RenderGroupOps(g, *pre, "    ", &base, &once);
    if (!st.ok()) return st;
    e.once = once;
  }
  // lines: every input loaded; coop_lines: those in `loaded` taken from there
  for (int reuse : {0, 1}) {
    std::map<std::string, std::string> names = base;
    std::string loads;
    for (size_t i = 0; i < grp.inputs.size(); ++i) {
      if (names.count(grp.inputs[i])) continue;  // the value, or what pre made of it
      // named ein<i>: a prologue's inputs, in the same kernel, are in<i>
      const std::string si = std::to_string(i);
      const Node& in = *g.Find(grp.inputs[i]);
      if (!reuse) {
        e.params.push_back("ein" + si);
        e.head += InputPrelude(in, i, "ein");
      }
      names[grp.inputs[i]] = in.is_number ? "ein" + si : "epin" + si;
      if (in.is_number) continue;
      auto l = loaded.find(grp.inputs[i]);
      if (reuse && l != loaded.end() && in.shape == grp.shape) {
        names[grp.inputs[i]] = l->second;
      } else {
        loads += InputLoad(in, grp, i, "epin" + si, "m", "        ", "ein");
      }
    }
    Status st = RenderGroupOps(g, grp, "        ", &names, &loads);
    if (!st.ok()) return st;
    for (size_t i = 0; i < grp.outputs.size(); ++i) {
      loads += "        tl.store(out" + std::to_string(i) + " + offs, " + names.at(grp.outputs[i]) + ", mask=m)\n";
    }
    (reuse ? e.coop_lines : e.lines) = loads;
  }
  e.outputs = grp.outputs.size();
  *out = std::move(e);
  return Status::Ok();
}

// A sum or mean over the N output features of a Linear, through a chain of
// elementwise operators affine in it (CountLinearReductions).
struct LinearReduce {
  size_t red = 0;          // the reduction replaced
  int linear = -1;         // the Linear node
  GemmOp gemm;
  std::vector<int> chain;  // the elementwise nodes between them, in order
  struct Step {
    std::string kind;  // AffineStep's: add, sub, rsub, mul, div
    EwOperand c;       // the other operand
  };
  std::vector<Step> steps;            // per chain node
  std::vector<std::string> operands;  // tensors and numbers the chain reads, in order
};

// The affine step y' = f(y, c) of one chain operator on y (the chain value):
// "add", "sub", "rsub" (c - y), "mul" or "div" (y / c); false when f is not one.
bool AffineStep(const EwOp& op, const std::string& y, std::string* kind, EwOperand* c) {
  if (op.operands.size() != 2 || !op.params.empty()) return false;
  const bool first = op.operands[0].node == y, second = op.operands[1].node == y;
  if (first == second) return false;
  *c = op.operands[first ? 1 : 0];
  if (op.fn == "add" || op.fn == "mul") *kind = op.fn;
  else if (op.fn == "sub") *kind = first ? "sub" : "rsub";
  else if (op.fn == "div" && first) *kind = "div";
  else return false;
  return true;
}

std::vector<LinearReduce> FormLinearReductions(const Graph& g, const std::vector<std::pair<int, RedOp>>& reds) {
  std::vector<LinearReduce> out;
  for (size_t k = 0; k < reds.size(); ++k) {
    const RedOp& op = reds[k].second;
    if ((op.kind != "sum" && op.kind != "mean") || op.geo.IN != 1) continue;
    LinearReduce lr;
    lr.red = k;
    const Node* cur = g.Find(op.input);
    int reader = reds[k].first;
    bool ok = cur != nullptr;
    while (ok) {
      ok = cur->users.size() == 1 && cur->users[0] == reader;
      if (!ok) break;
      GemmOp gop;
      if (ClassifyGemm(g, *cur, &gop) && gop.linear) {
        lr.linear = g.index.at(cur->name);
        lr.gemm = gop;
        break;
      }
      EwOp ew;
      std::string kind;
      EwOperand c;
      ok = ClassifyElementwise(g, *cur, &ew) && ew.operands.size() == 2;
      if (!ok) break;
      // which operand continues the chain: the one that is not a constant, a
      // number or a per-feature tensor (tried in order; a chain has one)
      const Node* next = nullptr;
      for (const auto& o : ew.operands) {
        const Node* n = o.node.empty() ? nullptr : g.Find(o.node);
        if (n && n->is_tensor && n->shape == cur->shape) next = n;
      }
      ok = next && AffineStep(ew, next->name, &kind, &c);
      if (!ok) break;
      if (!c.node.empty()) {
        const Node* cn = g.Find(c.node);
        // c: a number, or a tensor constant along every dimension but the last
        int64_t lead = 1;
        if (cn->is_tensor) {
          for (size_t d = 0; d + 1 < cn->shape.size(); ++d) lead *= cn->shape[d];
        }
        ok = cn->is_number || (cn->is_tensor && cn->dtype == "torch.float32" && lead == 1 &&
                               cn->shape.size() <= cur->shape.size());
        if (ok && (kind == "mul" || kind == "div")) {  // scalings by one value only
          int64_t numel = 1;
          for (int64_t d : cn->shape) numel *= d;
          ok = cn->is_number || numel == 1;
        }
        if (!ok) break;
      }
      const int idx = g.index.at(cur->name);
      lr.chain.insert(lr.chain.begin(), idx);
      lr.steps.insert(lr.steps.begin(), {kind, c});
      reader = idx;
      cur = next;
    }
    if (!ok || lr.linear < 0) continue;
    if (op.geo.R != lr.gemm.N || op.geo.rows != lr.gemm.M) continue;  // over exactly the features
    for (const auto& st : lr.steps) {
      if (!st.c.node.empty() && std::find(lr.operands.begin(), lr.operands.end(), st.c.node) == lr.operands.end()) {
        lr.operands.push_back(st.c.node);
      }
    }
    out.push_back(std::move(lr));
  }
  return out;
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

}  // namespace

int CountLinearReductions(const Graph& g) {
  Plan p;
  return static_cast<int>(FormLinearReductions(g, FormReductions(g, p)).size());
}

namespace {

// The launcher's second argument: the Linear module or the other matrix.
std::string GemmSecond(const GemmOp& op) { return op.module.empty() ? Var(op.other) : AttrExpr(op.module); }

// For each GEMM, the group it runs as its epilogue: a group of C's shape
// that reads C, holding every reader of C, applying no norm itself.
std::map<size_t, size_t> FormEpilogues(const Graph& g, const std::vector<Group>& groups,
                                       const std::vector<std::pair<int, GemmOp>>& gemms,
                                       const std::vector<std::map<size_t, NormFeed>>& feeds) {
  std::map<size_t, size_t> out;
  std::set<size_t> taken;
  std::map<int, size_t> group_of;
  for (size_t k = 0; k < groups.size(); ++k) {
    for (int idx : groups[k].nodes) group_of[idx] = k;
  }
  for (size_t k = 0; k < gemms.size(); ++k) {
    const Node& n = g.nodes[gemms[k].first];
    if (n.users.empty() || !group_of.count(n.users[0])) continue;
    const size_t j = group_of.at(n.users[0]);
    bool all_in = true;
    for (int u : n.users) all_in = all_in && group_of.count(u) && group_of.at(u) == j;
    const Group& grp = groups[j];
    if (!all_in || taken.count(j) || !feeds[j].empty() || grp.shape != gemms[k].second.out_shape) continue;
    if (std::find(grp.inputs.begin(), grp.inputs.end(), n.name) == grp.inputs.end()) continue;
    out[k] = j;
    taken.insert(j);
  }
  return out;
}

}  // namespace

std::vector<std::pair<int, RowNormOp>> FormRowNorms(const Graph& g, const Plan& plan) {
  std::vector<std::pair<int, RowNormOp>> out;
  if (plan.library_reductions) return out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    RowNormOp op;
    if (ClassifyRowNorm(g, g.nodes[i], &op)) out.push_back({static_cast<int>(i), op});
  }
  return out;
}

RowNormSchedule RowNormFor(const Plan& plan, size_t k, const RowNormOp& op) {
  if (k < plan.nsched.size()) return plan.nsched[k];
  RowNormSchedule s;
  const auto strategies = RowNormStrategies(op);
  if (!strategies.empty()) DefaultRowNormSchedule(op, strategies.front(), &s);
  return s;
}

std::vector<std::pair<int, GemmOp>> FormGemms(const Graph& g, const Plan& plan) {
  std::vector<std::pair<int, GemmOp>> out;
  if (!plan.gemm) return out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    GemmOp op;
    if (ClassifyGemm(g, g.nodes[i], &op) || (plan.conv && ClassifyConv(g, g.nodes[i], &op))) {
      out.push_back({static_cast<int>(i), op});
    }
  }
  return out;
}

GemmSchedule GemmScheduleFor(const Plan& plan, size_t k, const GemmOp& op) {
  if (k < plan.gsched.size()) return plan.gsched[k];
  return op.IsConv() ? DefaultConvSchedule(op) : GemmSchedule();
}

namespace {

// Sibling reductions (plan siblings): leader -> the later reductions computed
// in its kernel. Members are sums, means, maxima or minima over the same rows
// of one shape (no epilogue, not rewritten away), each read through its
// prologue or directly, sharing a tensor input with an earlier member; a
// later member's inputs are all computed before the leader, whose place in
// the forward the fused launch takes.
std::map<size_t, std::vector<size_t>> FormSiblings(const Graph& g, const std::vector<Group>& groups,
                                                   const std::vector<std::pair<int, RedOp>>& reds,
                                                   const std::map<size_t, size_t>& prologue_of,
                                                   const std::set<size_t>& skip) {
  auto eligible = [&](size_t k) {
    const RedOp& op = reds[k].second;
    return !skip.count(k) && op.absorbed.empty() &&
           (op.kind == "sum" || op.kind == "mean" || op.kind == "amax" || op.kind == "amin");
  };
  auto inputs = [&](size_t k) {
    if (auto p = prologue_of.find(k); p != prologue_of.end()) return groups[p->second].inputs;
    return std::vector<std::string>{reds[k].second.input};
  };
  auto same_rows = [](const RedOp& a, const RedOp& b) {
    const Geometry &x = a.geo, &y = b.geo;
    return a.in_shape == b.in_shape && x.rows == y.rows && x.R == y.R && x.RD == y.RD && x.S1 == y.S1 &&
           x.S2 == y.S2 && x.IN == y.IN && x.S3 == y.S3;
  };
  std::map<size_t, std::vector<size_t>> out;
  std::set<size_t> taken;
  for (size_t k = 0; k < reds.size(); ++k) {
    if (taken.count(k) || !eligible(k)) continue;
    std::set<std::string> tensors;  // the members' tensor inputs so far
    for (const auto& in : inputs(k)) {
      if (!g.Find(in)->is_number) tensors.insert(in);
    }
    for (size_t k2 = k + 1; k2 < reds.size(); ++k2) {
      if (taken.count(k2) || !eligible(k2) || !same_rows(reds[k].second, reds[k2].second)) continue;
      bool shares = false, ready = true;
      for (const auto& in : inputs(k2)) {
        shares = shares || tensors.count(in) > 0;
        ready = ready && g.index.at(in) < reds[k].first;
      }
      if (!shares || !ready) continue;
      for (const auto& in : inputs(k2)) {
        if (!g.Find(in)->is_number) tensors.insert(in);
      }
      out[k].push_back(k2);
      taken.insert(k2);
    }
    if (out.count(k)) taken.insert(k);
  }
  return out;
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

int CountSiblingReductions(const Graph& g, const Plan& plan) {
  std::vector<Group> groups = FormGroups(g, plan.Fusion());
  std::vector<std::pair<int, RedOp>> reds = FormReductions(g, plan);
  std::map<size_t, size_t> prologue_of;
  if (plan.reduce_prologue) {
    std::set<int> fed;
    std::vector<std::map<size_t, NormFeed>> feeds =
        plan.norm_epilogue ? FormFeeds(g, groups, reds, &fed) : std::vector<std::map<size_t, NormFeed>>(groups.size());
    prologue_of = FormPrologues(g, groups, reds, feeds, fed);
  }
  int n = 0;
  for (const auto& [k, f] : FormSiblings(g, groups, reds, prologue_of, {})) n += static_cast<int>(f.size());
  return n;
}

int CountReducePrologues(const Graph& g, const Plan& plan) {
  std::vector<Group> groups = FormGroups(g, plan.Fusion());
  std::vector<std::pair<int, RedOp>> reds = FormReductions(g, plan);
  std::set<int> fed;
  std::vector<std::map<size_t, NormFeed>> feeds =
      plan.norm_epilogue ? FormFeeds(g, groups, reds, &fed) : std::vector<std::map<size_t, NormFeed>>(groups.size());
  return static_cast<int>(FormPrologues(g, groups, reds, feeds, fed).size());
}

int CountNormEpilogues(const Graph& g, const Plan& plan) {
  std::vector<Group> groups = FormGroups(g, plan.Fusion());
  std::vector<std::pair<int, RedOp>> reds = FormReductions(g, plan);
  std::set<int> fed;
  FormFeeds(g, groups, reds, &fed);
  return static_cast<int>(fed.size());
}

int CountRedEpilogues(const Graph& g, const Plan& plan) {
  std::vector<Group> groups = FormGroups(g, plan.Fusion());
  std::vector<std::pair<int, RedOp>> reds = FormReductions(g, plan);
  return static_cast<int>(
      FormRedEpilogues(g, groups, reds, std::vector<std::map<size_t, NormFeed>>(groups.size()), {}, {}, plan.red)
          .size());
}

std::vector<std::pair<int, RedOp>> FormReductions(const Graph& g, const Plan& plan) {
  std::vector<std::pair<int, RedOp>> out;
  if (plan.library_reductions) return out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    RedOp op;
    if (ClassifyReduction(g, g.nodes[i], &op)) out.push_back({static_cast<int>(i), op});
  }
  // A node another reduction absorbs (the scan inside a reversed scan) is
  // not one of its own.
  std::set<std::string> absorbed;
  for (const auto& [i, op] : out) absorbed.insert(op.absorbed.begin(), op.absorbed.end());
  std::erase_if(out, [&](const auto& r) { return absorbed.count(g.nodes[r.first].name) > 0; });
  return out;
}

Status Generate(const Graph& g, const std::string& task_source, const Plan& plan, std::string* source,
                int* kernels, Plan* resolved) {
  std::vector<Group> groups = FormGroups(g, plan.Fusion());
  std::vector<std::pair<int, RedOp>> reds = FormReductions(g, plan);
  std::vector<std::pair<int, GemmOp>> gemms = FormGemms(g, plan);
  const std::vector<std::pair<int, RowNormOp>> rnorms = FormRowNorms(g, plan);

  // Algebraic rewrites: reductions over a Linear's features computed from
  // the summed weight; the Linear and the chain between are not computed.
  std::vector<LinearReduce> linreds;
  std::map<size_t, size_t> linred_of;  // reduction -> rewrite
  std::set<int> unused;                // nodes no longer computed
  std::set<size_t> chain_groups;       // groups made of a rewrite's chain
  if (plan.algebra) {
    for (auto& lr : FormLinearReductions(g, reds)) {
      std::set<int> chain(lr.chain.begin(), lr.chain.end());
      std::set<size_t> own;
      bool whole = true;  // every group touching the chain is made of chain nodes only
      for (size_t j = 0; j < groups.size(); ++j) {
        int in_chain = 0;
        for (int idx : groups[j].nodes) in_chain += chain.count(idx);
        if (in_chain == 0) continue;
        whole = whole && in_chain == static_cast<int>(groups[j].nodes.size());
        own.insert(j);
      }
      if (!whole) continue;
      chain_groups.insert(own.begin(), own.end());
      unused.insert(lr.linear);
      unused.insert(chain.begin(), chain.end());
      linred_of[lr.red] = linreds.size();
      linreds.push_back(std::move(lr));
    }
    std::vector<std::pair<int, GemmOp>> kept;
    for (auto& ge : gemms) {
      if (!unused.count(ge.first)) kept.push_back(std::move(ge));
    }
    gemms = std::move(kept);
  }
  if (kernels) {
    *kernels = static_cast<int>(groups.size() + reds.size() + gemms.size() + rnorms.size() - linreds.size() -
                                chain_groups.size());
  }
  if (groups.empty() && reds.empty() && gemms.empty() && rnorms.empty()) {
    return Status::Error("nothing to fuse: every operator stays a library call");
  }
  Plan written = plan;
  written.sched.resize(groups.size());
  for (size_t k = 0; k < groups.size(); ++k) written.sched[k] = plan.For(k);
  written.red.resize(reds.size());
  std::map<int, size_t> red_of;  // node -> reduction index
  std::set<std::string> absorbed;  // nodes a reduction replaces (max/min before [0])
  for (size_t k = 0; k < reds.size(); ++k) {
    written.red[k] = plan.RedFor(k);
    red_of[reds[k].first] = k;
    absorbed.insert(reds[k].second.absorbed.begin(), reds[k].second.absorbed.end());
  }
  written.gsched.resize(gemms.size());
  std::map<int, size_t> gemm_of;  // node -> GEMM index
  for (size_t k = 0; k < gemms.size(); ++k) {
    written.gsched[k] = GemmScheduleFor(plan, k, gemms[k].second);
    gemm_of[gemms[k].first] = k;
  }

  written.nsched.resize(rnorms.size());
  std::map<int, size_t> rnorm_of;  // node -> row norm index
  for (size_t k = 0; k < rnorms.size(); ++k) {
    written.nsched[k] = RowNormFor(plan, k, rnorms[k].second);
    rnorm_of[rnorms[k].first] = k;
  }

  std::map<int, size_t> last_of;  // the last node of a group -> the group
  std::set<int> fused;
  for (size_t k = 0; k < groups.size(); ++k) {
    last_of[groups[k].nodes.back()] = k;
    fused.insert(groups[k].nodes.begin(), groups[k].nodes.end());
  }

  // Norms applied inside the one elementwise kernel that reads them.
  std::set<int> fed;  // norm nodes not emitted on their own
  std::vector<std::map<size_t, NormFeed>> feeds =
      plan.norm_epilogue ? FormFeeds(g, groups, reds, &fed) : std::vector<std::map<size_t, NormFeed>>(groups.size());

  // Elementwise kernels run as the epilogue of the GEMM they read.
  std::map<size_t, size_t> epilogue_of = FormEpilogues(g, groups, gemms, feeds);  // GEMM -> group
  std::map<size_t, size_t> gemm_of_group;                                         // group -> GEMM
  std::set<size_t> inside = chain_groups;  // groups not launched on their own
  for (const auto& [k, j] : epilogue_of) {
    gemm_of_group[j] = k;
    inside.insert(j);
  }

  // Elementwise kernels computed inside the reduction that reads them.
  std::map<size_t, size_t> prologue_of;  // reduction -> group
  if (plan.reduce_prologue) {
    prologue_of = FormPrologues(g, groups, reds, feeds, fed, inside);
    for (const auto& [k, j] : prologue_of) inside.insert(j);
  }
  // Elementwise kernels run after the reduction they read, in its kernel.
  std::map<size_t, RedEpi> epi_of;        // reduction -> groups
  std::map<size_t, size_t> epi_of_group;  // main group -> reduction
  if (plan.red_epilogue) {
    std::set<size_t> skip;
    for (const auto& [k, i] : linred_of) skip.insert(k);
    for (const auto& [k, e] : FormRedEpilogues(g, groups, reds, feeds, inside, skip, plan.red)) {
      epi_of[k] = e;
      epi_of_group[e.main] = k;
      inside.insert(e.main);
      if (e.has_pre()) inside.insert(e.pre);
    }
  }
  // Sibling reductions computed in one kernel, launched at the leader.
  std::map<size_t, std::vector<size_t>> sib_of;  // leader -> the later members
  std::set<size_t> follower;
  std::map<size_t, std::vector<std::string>> sib_inputs;  // leader -> its launcher's inputs
  if (plan.siblings) {
    std::set<size_t> skip;
    for (const auto& [k, i] : linred_of) skip.insert(k);
    for (const auto& [k, e] : epi_of) skip.insert(k);
    sib_of = FormSiblings(g, groups, reds, prologue_of, skip);
    for (const auto& [k, f] : sib_of) follower.insert(f.begin(), f.end());
  }
  if (kernels) *kernels -= static_cast<int>(inside.size() - chain_groups.size() + follower.size());
  // A kernel that is not launched has no schedule of its own: the marker (and
  // so the source) is the same whatever a small step set there.
  for (size_t k : inside) written.sched[k] = KernelSchedule();

  std::string kernel_src;
  for (size_t k = 0; k < groups.size(); ++k) {
    if (inside.count(k)) continue;
    Status st = EmitGroup(g, groups[k], k, written.For(k), feeds[k], &kernel_src);
    if (!st.ok()) return st;
  }
  for (size_t k = 0; k < rnorms.size(); ++k) {
    Status st = EmitRowNorm(rnorms[k].second, k, written.nsched[k], &kernel_src);
    if (!st.ok()) return st;
  }
  for (size_t k = 0; k < gemms.size(); ++k) {
    auto e = epilogue_of.find(k);
    Status st = EmitGemm(g, g.nodes[gemms[k].first], gemms[k].second, k, written.GemmFor(k),
                         e == epilogue_of.end() ? nullptr : &groups[e->second], &kernel_src);
    if (!st.ok()) return st;
  }
  for (size_t k = 0; k < reds.size(); ++k) {
    if (auto it = linred_of.find(k); it != linred_of.end()) {
      written.red[k] = RedSchedule();
      kernel_src += EmitLinearReduce(g, linreds[it->second], reds[k].second, it->second);
      continue;
    }
    if (follower.count(k)) {
      written.red[k] = RedSchedule();  // computed in its leader's kernel
      continue;
    }
    if (auto sb = sib_of.find(k); sb != sib_of.end()) {
      std::vector<size_t> members = {k};
      members.insert(members.end(), sb->second.begin(), sb->second.end());
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
      Status st = MakeSiblingPrologue(g, pg, direct, reds[k].second.in_shape, &pro, &sib_inputs[k]);
      if (st.ok()) st = EmitSiblingReductions(ops, k, written.RedFor(k), pro, &kernel_src);
      if (!st.ok()) return st;
      continue;
    }
    ReductionPrologue pro;
    const bool with = prologue_of.count(k) > 0;
    if (with) {
      Status st = MakePrologue(g, groups[prologue_of.at(k)], &pro);
      if (!st.ok()) return st;
    }
    ReductionEpilogue epi;
    const bool with_epi = epi_of.count(k) > 0;
    if (with_epi) {
      const RedEpi& e = epi_of.at(k);
      // what the reduction's kernel already holds at the element: its
      // prologue's inputs, or x itself (in v)
      const std::map<std::string, std::string> loaded =
          with ? pro.loaded : std::map<std::string, std::string>{{reds[k].second.input, "v"}};
      Status st = MakeRedEpilogue(g, e.has_pre() ? &groups[e.pre] : nullptr, groups[e.main],
                                  g.nodes[reds[k].first].name, loaded, &epi);
      if (!st.ok()) return st;
    }
    Status st = EmitReduction(reds[k].second, k, written.RedFor(k), &kernel_src, with ? &pro : nullptr,
                              with_epi ? &epi : nullptr);
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
  std::ostringstream body;
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
        body << "        ";
        for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j]);
        body << " = _ax_gemm" << gk << "(" << Var(gemms[gk].second.input) << ", " << GemmSecond(gemms[gk].second);
        for (const auto& in : grp.inputs) {
          if (in != lin.name) body << ", " << Var(in);
        }
        body << ")\n";
        continue;
      }
      if (auto e = epi_of_group.find(it->second); e != epi_of_group.end()) {
        // run by the reduction it reads, launched here
        std::set<std::string> skip_in = {g.nodes[reds[e->second].first].name};
        if (const RedEpi& re = epi_of.at(e->second); re.has_pre()) {
          skip_in.insert(groups[re.pre].outputs.begin(), groups[re.pre].outputs.end());
        }
        body << "        ";
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
        body << ")\n";
        continue;
      }
      if (inside.count(it->second)) continue;  // computed by the reduction that reads it
      body << "        ";
      for (size_t j = 0; j < grp.outputs.size(); ++j) body << (j ? ", " : "") << Var(grp.outputs[j]);
      body << " = _ax_launch" << it->second << "(";
      for (size_t j = 0; j < grp.inputs.size(); ++j) {
        body << (j ? ", " : "");
        if (auto f = feeds[it->second].find(j); f != feeds[it->second].end()) {
          body << Var(f->second.op->input) << ", " << AttrExpr(f->second.op->module);
        } else {
          body << Var(grp.inputs[j]);
        }
      }
      body << ")\n";
      continue;
    }
    if (fused.count(static_cast<int>(i)) || absorbed.count(n.name) || fed.count(static_cast<int>(i)) ||
        dropped.count(static_cast<int>(i))) {
      continue;
    }
    if (IsDeviceOf(n) && !first_tensor.empty()) {
      // x may live inside a fused kernel (never materialised): every input
      // of a KernelBench forward is on one device.
      body << "        " << v << " = " << first_tensor << ".device\n";
      continue;
    }
    if (unused.count(static_cast<int>(i))) continue;  // rewritten away
    if (auto it = rnorm_of.find(static_cast<int>(i)); it != rnorm_of.end()) {
      const RowNormOp& op = rnorms[it->second].second;
      body << "        " << v << " = _ax_rnorm" << it->second << "(" << Var(op.input);
      if (op.weight == RowNormOp::Weight::kNode) body << ", " << Var(op.weight_ref);
      if (op.weight == RowNormOp::Weight::kModule) body << ", " << AttrExpr(op.weight_ref) << ".weight";
      body << ")\n";
      continue;
    }
    if (auto it = gemm_of.find(static_cast<int>(i)); it != gemm_of.end()) {
      if (epilogue_of.count(it->second)) continue;  // launched with its epilogue
      const GemmOp& op = gemms[it->second].second;
      body << "        " << v << " = _ax_gemm" << it->second << "(" << Var(op.input) << ", " << GemmSecond(op) << ")\n";
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && linred_of.count(it->second)) {
      const LinearReduce& lr = linreds[linred_of.at(it->second)];
      body << "        " << v << " = _ax_linred" << linred_of.at(it->second) << "(" << Var(lr.gemm.input) << ", "
           << AttrExpr(lr.gemm.module);
      for (const auto& o : lr.operands) body << ", " << Var(o);
      body << ")\n";
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && epi_of.count(it->second)) {
      continue;  // computed inside the kernel of the group that reads it
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && follower.count(it->second)) {
      continue;  // computed with its sibling reductions, at the first of them
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end() && sib_of.count(it->second)) {
      body << "        " << v;
      for (size_t m : sib_of.at(it->second)) body << ", " << Var(g.nodes[reds[m].first].name);
      body << " = _ax_red" << it->second << "(";
      const auto& ins = sib_inputs.at(it->second);
      for (size_t j = 0; j < ins.size(); ++j) body << (j ? ", " : "") << Var(ins[j]);
      body << ")\n";
      continue;
    }
    if (auto it = red_of.find(static_cast<int>(i)); it != red_of.end()) {
      const RedOp& op = reds[it->second].second;
      body << "        " << v << " = _ax_red" << it->second << "(";
      if (auto p = prologue_of.find(it->second); p != prologue_of.end()) {
        const Group& grp = groups[p->second];
        for (size_t j = 0; j < grp.inputs.size(); ++j) body << (j ? ", " : "") << Var(grp.inputs[j]);
      } else {
        body << Var(op.input);
      }
      if (op.kind == "norm") body << ", " << AttrExpr(op.module);
      if (op.kind == "xent") body << ", " << Var(op.target);
      body << ")\n";
      continue;
    }
    std::string args;
    Status st;
    if (n.op == "get_attr" && n.is_constant) {
      // Not an attribute of the model: rebuilt here, on the inputs' device.
      if (n.constant_expr.empty()) return Status::Error("the forward creates a tensor constant too large to inline");
      if (first_tensor.empty()) return Status::Error("a tensor constant in a forward without tensor inputs");
      body << "        " << v << " = " << n.constant_expr << ".to(" << first_tensor << ".device)\n";
    } else if (n.op == "get_attr") {
      body << "        " << v << " = " << AttrExpr(n.target) << "\n";
    } else if (n.op == "call_module") {
      st = RenderCallArgs(n, 0, &args);
      if (!st.ok()) return st;
      body << "        " << v << " = " << AttrExpr(n.target) << "(" << args << ")\n";
    } else if (n.op == "call_function") {
      if (n.callable.empty()) return Status::Error("no Python name for function " + n.target);
      st = RenderCallArgs(n, 0, &args);
      if (!st.ok()) return st;
      body << "        " << v << " = " << n.callable << "(" << args << ")\n";
    } else if (n.op == "call_method") {
      if (n.args.empty() || !IsIdent(n.target)) return Status::Error("malformed method call " + n.name);
      std::string self;
      st = RenderArg(n.args[0], &self);
      if (!st.ok()) return st;
      st = RenderCallArgs(n, 1, &args);
      if (!st.ok()) return st;
      body << "        " << v << " = " << self << "." << n.target << "(" << args << ")\n";
    } else if (n.op == "output") {
      if (n.args.empty()) return Status::Error("output node without a value");
      st = RenderArg(n.args[0], &args);
      if (!st.ok()) return st;
      body << "        return " << args << "\n";
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
  out << kernel_src;
  out << "class ModelNew(Model):\n    def forward(self";
  for (const auto& p : params) out << ", " << p;
  out << "):\n" << body.str();
  *source = out.str();
  if (resolved) *resolved = written;
  return Status::Ok();
}

}  // namespace ax::builtin

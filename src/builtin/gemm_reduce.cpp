#include "builtin/gemm_reduce.h"

#include <algorithm>

#include "builtin/conv.h"
#include "builtin/ewgen.h"

namespace ax::builtin {

namespace {

bool ColumnKind(const std::string& kind) {
  return kind == "sum" || kind == "mean" || kind == "amax" || kind == "amin" || kind == "logsumexp" ||
         kind == "softmax" || kind == "log_softmax";
}

// A softmax's value has the tile's shape; the others one value per row.
bool TileShaped(const RedOp& op) { return op.kind == "softmax" || op.kind == "log_softmax"; }

int64_t Pow2AtLeast(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

bool ReducesColumns(const RedOp& r, const GemmOp& op) {
  if (!ColumnKind(r.kind) || r.in_shape != op.out_shape || op.out_shape.size() < 2 || op.Batched()) return false;
  const int64_t n = op.IsConv() ? op.conv.cout : op.out_shape.back();
  if (n < 1 || n > kColumnReductionMaxN) return false;
  if (op.IsConv() && op.conv.groups != 1) return false;  // the channels span program axis 1
  const int dim = op.IsConv() ? 1 : static_cast<int>(op.out_shape.size()) - 1;
  Geometry want;
  return MakeGeometry(op.out_shape, {dim}, &want) && want == r.geo;
}

bool IsPool(const RedOp& r) { return r.kind == "maxpool" || r.kind == "avgpool"; }

int64_t PoolWindowSize(const RedOp& r) {
  int64_t w = 1;
  for (int64_t k : r.pool_k) w *= k;
  return w;
}

bool PoolsWindows(const RedOp& r, const GemmOp& op) {
  if (!IsPool(r) || !op.IsConv() || r.pool_adaptive || r.pool_ceil || r.in_shape != op.out_shape) return false;
  if (ConvPhases(op) != 1 || static_cast<int>(r.pool_k.size()) != op.conv.dims) return false;
  for (size_t d = 0; d < r.pool_k.size(); ++d) {
    if (r.pool_s[d] != r.pool_k[d] || r.pool_p[d] != 0 || (!r.pool_d.empty() && r.pool_d[d] != 1)) return false;
  }
  const int64_t w = PoolWindowSize(r);
  return w >= 2 && w <= kPoolWindowMax && (w & (w - 1)) == 0;
}

bool ReducesInTile(const RedOp& r, const GemmOp& op) { return ReducesColumns(r, op) || PoolsWindows(r, op); }

std::map<size_t, ColumnFusion> FormColumnReductions(const Graph& g, const std::vector<Group>& groups,
                                                    const std::vector<std::pair<int, RedOp>>& reds,
                                                    const std::vector<std::pair<int, GemmOp>>& gemms,
                                                    const std::map<size_t, size_t>& epilogue_of,
                                                    const std::set<size_t>& taken, const std::set<size_t>& skip) {
  std::map<int, size_t> group_of;
  for (size_t j = 0; j < groups.size(); ++j) {
    for (int idx : groups[j].nodes) group_of[idx] = j;
  }
  std::set<size_t> used = taken;
  std::map<size_t, ColumnFusion> out;
  for (size_t k = 0; k < gemms.size(); ++k) {
    // the tensor the reduction would read: the epilogue's one output, or C
    std::string x = g.nodes[gemms[k].first].name;
    if (auto e = epilogue_of.find(k); e != epilogue_of.end()) {
      const Group& grp = groups[e->second];
      if (grp.outputs.size() != 1) continue;
      x = grp.outputs[0];
    }
    const Node* xn = g.Find(x);
    if (!xn || xn->users.size() != 1) continue;
    for (size_t r = 0; r < reds.size(); ++r) {
      const auto& [ni, op] = reds[r];
      if (skip.count(r) || op.input != x || !ReducesInTile(op, gemms[k].second)) continue;
      // the reader: the reduction itself, or the max/min it absorbs
      const int reader = op.absorbed.empty() ? ni : g.index.at(op.absorbed.front());
      if (xn->users[0] != reader) continue;
      ColumnFusion f;
      f.red = r;
      // the group that alone reads the reduction's value, of its shape
      const Node& rn = g.nodes[ni];
      if (!rn.users.empty() && group_of.count(rn.users[0])) {
        const size_t j = group_of.at(rn.users[0]);
        bool all_in = true;
        for (int u : rn.users) all_in = all_in && group_of.count(u) && group_of.at(u) == j;
        const Group& grp = groups[j];
        if (all_in && !used.count(j) && grp.dtype == "torch.float32" &&
            grp.shape == (TileShaped(op) ? op.in_shape : op.out_shape) &&
            std::find(grp.inputs.begin(), grp.inputs.end(), rn.name) != grp.inputs.end()) {
          f.post = j;
          used.insert(j);
        }
      }
      out[k] = f;
      break;
    }
  }
  return out;
}

GemmSchedule WithColumnTile(GemmSchedule s, const GemmOp& op, const RedOp& r) {
  if (IsPool(r)) {
    while (s.bm < PoolWindowSize(r)) s.bm *= 2;
    return s;
  }
  const int64_t n = op.IsConv() ? op.conv.cout : op.out_shape.back();
  const int bn = static_cast<int>(std::max<int64_t>(16, Pow2AtLeast(n)));
  if (bn != s.bn) {
    s.bn = bn;
    // the accumulator in registers: at most 128 x 128 per program
    while (s.bm > 16 && s.bm * s.bn > 128 * 128) s.bm /= 2;
    s.warps = s.bm * s.bn >= 128 * 128 ? 8 : 4;
  }
  while (s.SharedBytes() > 200 * 1024 && s.bk > 16) s.bk /= 2;
  while (s.SharedBytes() > 200 * 1024 && s.stages > 1) --s.stages;
  return s;
}

std::string ColumnTailDescription(const ColumnTail& tail, const std::string& noun) {
  std::string s = tail.op->kind + " over " + noun;
  if (tail.post) {
    s += ", then";
    for (size_t j = 0; j < tail.post->nodes.size(); ++j) {
      s += (j ? ", " : " ") + tail.post->ops.at(tail.post->nodes[j]).fn;
    }
  }
  return s;
}

std::string ColumnPostSignature(const ColumnTail* tail) {
  std::string sig;
  if (!tail || !tail->post) return sig;
  for (size_t i = 0; i < tail->post->inputs.size(); ++i) {
    if (tail->post->inputs[i] != tail->node) sig += ", pin" + std::to_string(i);
  }
  return sig;
}

void ColumnPostPrelude(const Graph& g, const ColumnTail* tail, PyWriter* w) {
  if (!tail || !tail->post) return;
  for (size_t i = 0; i < tail->post->inputs.size(); ++i) {
    if (tail->post->inputs[i] != tail->node) InputPrelude(w, *g.Find(tail->post->inputs[i]), i, "pin");
  }
}

std::vector<int64_t> ColumnOutShape(const ColumnTail& tail) {
  if (tail.post) return tail.post->shape;
  return TileShaped(*tail.op) ? tail.op->in_shape : tail.op->out_shape;
}

size_t ColumnOutputs(const ColumnTail& tail) { return tail.post ? tail.post->outputs.size() : 1; }

namespace {
// The reduction's value `cr` of a column reduction, and where it is stored.
void EmitColumnReductionValue(const ColumnStore& cs, const std::string& value, PyWriter* w);
Status EmitColumnPost(const Graph& g, const ColumnStore& cs, PyWriter* w);
}  // namespace

Status EmitColumnReduction(const Graph& g, const ColumnStore& cs, const std::string& value, PyWriter* w) {
  const RedOp& op = *cs.tail.op;
  const std::string& kind = op.kind;
  if (IsPool(op)) {
    const std::string win = std::to_string(cs.window);
    if (cs.window != PoolWindowSize(op)) return Status::Error("a pooling's window that the tile rows do not follow");
    w->Line("# " + kind + " over windows of " + win + " output positions (" + win +
            " consecutive rows each), in this tile: the full output is never written");
    w->Line("pv = tl.reshape(" + value + ", (BM // " + win + ", " + win + ", BN))");
    // NaN wins in a max, as in PyTorch
    w->Line(std::string("cr = ") + (kind == "maxpool" ? "_ax_nanmax(pv, 1)" : "tl.sum(pv, axis=1) / " + win + ".0"));
    w->Line("offs = " + cs.rows);
    w->Line("mask = " + cs.rmask);
  } else {
    EmitColumnReductionValue(cs, value, w);
  }
  return EmitColumnPost(g, cs, w);
}

namespace {

void EmitColumnReductionValue(const ColumnStore& cs, const std::string& value, PyWriter* w) {
  const RedOp& op = *cs.tail.op;
  const int64_t n = op.geo.R;
  const std::string& kind = op.kind;
  w->Line("# " + kind + " over the " + std::to_string(n) + " " + cs.noun + ", in this tile" +
          (TileShaped(op) ? ": one store of the result" : ": the full output is never written"));
  std::string red;
  if (kind == "sum" || kind == "mean") {
    w->Line("cv = tl.where(" + cs.cols + ", " + value + ", 0.0)");
    red = "tl.sum(cv, axis=1)";
    if (kind == "mean") red += " / " + std::to_string(n) + ".0";
  } else if (kind == "amax" || kind == "amin") {
    // NaN wins, as in PyTorch
    const bool mx = kind == "amax";
    w->Line("cv = tl.where(" + cs.cols + ", " + value + ", float('" + (mx ? "-" : "") + "inf'))");
    red = std::string(mx ? "_ax_nanmax" : "_ax_nanmin") + "(cv, 1)";
  } else if (kind == "logsumexp") {  // a row of -inf gives -inf, one holding +inf gives +inf
    w->Line("cv = tl.where(" + cs.cols + ", " + value + ", float('-inf'))");
    w->Line("cmx = tl.max(cv, axis=1)");
    w->Line("csafe = tl.where(tl.abs(cmx) == float('inf'), 0.0, cmx)");
    red = "csafe + tl.log(tl.sum(tl.exp(cv - csafe[:, None]), axis=1))";
  } else {  // softmax, log_softmax: a row of -inf gives NaN, as in PyTorch
    w->Line("cv = tl.where(" + cs.cols + ", " + value + ", float('-inf'))");
    w->Line("cmx = tl.max(cv, axis=1)");
    w->Line("csafe = tl.where(cmx == float('-inf'), 0.0, cmx)[:, None]");
    w->Line("ce = tl.exp(cv - csafe)");
    w->Line("ctot = tl.sum(ce, axis=1)[:, None]");
    red = kind == "softmax" ? "ce / ctot" : "cv - (csafe + tl.log(ctot))";
  }
  w->Line("cr = " + red);
  if (!TileShaped(op)) {
    // one value per row from here on
    w->Line("offs = " + cs.rows);
    w->Line("mask = " + cs.rmask);
  }
}

// The post group on the reduced value `cr` at `offs` under `mask`, and the
// stores (of `cr` itself without one).
Status EmitColumnPost(const Graph& g, const ColumnStore& cs, PyWriter* w) {
  const Group* post = cs.tail.post;
  if (!post) {
    w->Line("tl.store(out0 + offs, cr, mask=mask)");
    return Status::Ok();
  }
  std::map<std::string, std::string> names;
  for (size_t i = 0; i < post->inputs.size(); ++i) {
    const std::string si = std::to_string(i);
    if (post->inputs[i] == cs.tail.node) {
      names[post->inputs[i]] = "cr";
      continue;
    }
    const Node& in = *g.Find(post->inputs[i]);
    names[post->inputs[i]] = in.is_number ? "pin" + si : "p" + si;
    if (!in.is_number) InputLoad(w, in, *post, i, "p" + si, "mask", "pin");
  }
  Status st = RenderGroupOps(g, *post, w, &names);
  if (!st.ok()) return st;
  for (size_t i = 0; i < post->outputs.size(); ++i) {
    w->Line("tl.store(out" + std::to_string(i) + " + offs, " + names.at(post->outputs[i]) + ", mask=mask)");
  }
  return Status::Ok();
}

}  // namespace

}  // namespace ax::builtin

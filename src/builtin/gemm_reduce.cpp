#include "builtin/gemm_reduce.h"

#include <algorithm>

namespace ax::builtin {

namespace {

bool ColumnKind(const std::string& kind) {
  return kind == "sum" || kind == "mean" || kind == "amax" || kind == "amin" || kind == "logsumexp";
}

bool SameGeometry(const Geometry& a, const Geometry& b) {
  return a.rows == b.rows && a.R == b.R && a.RD == b.RD && a.S1 == b.S1 && a.S2 == b.S2 && a.IN == b.IN &&
         a.S3 == b.S3;
}

int64_t Pow2AtLeast(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

bool ReducesColumns(const RedOp& r, const GemmOp& op) {
  if (!ColumnKind(r.kind) || r.in_shape != op.out_shape || op.out_shape.size() < 2) return false;
  const int64_t n = op.IsConv() ? op.conv.cout : op.out_shape.back();
  if (n < 1 || n > kColumnReductionMaxN) return false;
  if (op.IsConv() && op.conv.groups != 1) return false;  // the channels span program axis 1
  const int dim = op.IsConv() ? 1 : static_cast<int>(op.out_shape.size()) - 1;
  Geometry want;
  return MakeGeometry(op.out_shape, {dim}, &want) && SameGeometry(want, r.geo);
}

std::map<size_t, size_t> FormColumnReductions(const Graph& g, const std::vector<Group>& groups,
                                              const std::vector<std::pair<int, RedOp>>& reds,
                                              const std::vector<std::pair<int, GemmOp>>& gemms,
                                              const std::map<size_t, size_t>& epilogue_of,
                                              const std::set<size_t>& skip) {
  std::map<size_t, size_t> out;
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
      if (skip.count(r) || op.input != x || !ReducesColumns(op, gemms[k].second)) continue;
      // the reader: the reduction itself, or the max/min it absorbs
      const int reader = op.absorbed.empty() ? ni : g.index.at(op.absorbed.front());
      if (xn->users[0] != reader) continue;
      out[k] = r;
      break;
    }
  }
  return out;
}

GemmSchedule WithColumnTile(GemmSchedule s, const GemmOp& op) {
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

void EmitColumnReduction(const ColumnStore& cs, int64_t n, const std::string& value, PyWriter* w) {
  const std::string& kind = cs.op->kind;
  w->Line("# " + kind + " over the " + std::to_string(n) + " " + cs.noun + ", in this tile: the full output is never written");
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
  } else {  // logsumexp: a row of -inf gives -inf, one holding +inf gives +inf
    w->Line("cv = tl.where(" + cs.cols + ", " + value + ", float('-inf'))");
    w->Line("cmx = tl.max(cv, axis=1)");
    w->Line("csafe = tl.where(tl.abs(cmx) == float('inf'), 0.0, cmx)");
    red = "csafe + tl.log(tl.sum(tl.exp(cv - csafe[:, None]), axis=1))";
  }
  w->Line("tl.store(out0 + " + cs.rows + ", " + red + ", mask=" + cs.rmask + ")");
}

}  // namespace ax::builtin

#include "builtin/conv_stats.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "builtin/reduce_internal.h"

namespace ax::builtin {

namespace {

using red::CeilDiv;
using red::Pow2Ceil;

std::string S(int64_t v) { return std::to_string(v); }

int64_t TilesPerPhase(const GemmOp& op, const GemmSchedule& s) {
  return CeilDiv(op.conv.batch * ConvRowsPerImage(op), s.bm);
}

// The widest channel block a group norm's row may span in the merge.
constexpr int64_t kMaxRowChannels = 1024;

}  // namespace

bool NormRowsOf(const RedOp& r, const GemmOp& op, NormRows* rows) {
  if (r.kind != "norm" || !op.IsConv() || r.in_shape != op.out_shape) return false;
  const int64_t N = op.conv.batch, C = op.conv.cout;
  const int64_t OS = std::accumulate(op.conv.out.begin(), op.conv.out.end(), int64_t{1}, std::multiplies<int64_t>());
  const Geometry& g = r.geo;
  const std::string& cls = r.norm_class;
  if (cls.rfind("BatchNorm", 0) == 0) {
    if (g.rows != C || g.R != N * OS) return false;
    if (rows) rows->groups = 0;
    return true;
  }
  if (cls != "GroupNorm" && cls != "LayerNorm" && cls.rfind("InstanceNorm", 0) != 0) return false;
  // contiguous rows: addr(row, r) = row * R + r
  if (g.RD != 1 || g.S1 != g.R || g.IN != 1 || g.S3 != 1) return false;
  if (N <= 0 || g.rows % N != 0) return false;
  const int64_t G = g.rows / N;
  if (G <= 0 || C % G != 0 || g.R != (C / G) * OS || C / G > kMaxRowChannels) return false;
  if (rows) rows->groups = G;
  return true;
}

bool IsSpatialMean(const RedOp& r, const GemmOp& op) {
  if (r.kind != "mean" || !op.IsConv() || r.in_shape != op.out_shape) return false;
  std::vector<int> spatial;
  for (int d = 0; d < op.conv.dims; ++d) spatial.push_back(d + 2);
  Geometry want;
  return MakeGeometry(op.out_shape, spatial, &want) && want == r.geo;
}

bool StatsRowsOf(const RedOp& r, const GemmOp& op, NormRows* rows) {
  if (NormRowsOf(r, op, rows)) return true;
  if (!IsSpatialMean(r, op)) return false;
  if (rows) rows->groups = op.conv.cout;
  return true;
}

Status EmitMeanFromStatistics(const RedOp& op, size_t k, std::string* src) {
  if (op.kind != "mean") return Status::Error("partial means given to a " + op.kind);
  PyWriter w;
  {
    auto def = w.Open("def _ax_red" + S(static_cast<int64_t>(k)) + "(x, st):");
    w.Line("# the mean over every position of each image's channel: the means merged from the convolution's "
           "partials (its output x was not written)");
    w.Line("return st[0].view(" + PyShape(op.out_shape) + ")");
  }
  *src += w.str() + "\n\n";
  return Status::Ok();
}

std::map<size_t, size_t> FormConvStats(const Graph& g, const std::vector<Group>& groups,
                                       const std::vector<std::pair<int, RedOp>>& reds,
                                       const std::vector<std::pair<int, GemmOp>>& gemms,
                                       const std::map<size_t, size_t>& epilogue_of, const std::set<size_t>& skip) {
  std::map<size_t, size_t> out;
  for (size_t k = 0; k < gemms.size(); ++k) {
    const GemmOp& op = gemms[k].second;
    if (!op.IsConv() || ConvDirect(op) || ConvRowsPerImage(op) < 16) continue;  // a direct kernel has no partials
    std::string t = g.nodes[gemms[k].first].name;
    if (auto e = epilogue_of.find(k); e != epilogue_of.end()) {
      const Group& grp = groups[e->second];
      if (grp.outputs.size() != 1 || grp.shape != op.out_shape) continue;
      t = grp.outputs[0];
    }
    const Node* tn = g.Find(t);
    if (!tn || tn->users.size() != 1) continue;
    for (size_t r = 0; r < reds.size(); ++r) {
      NormRows rows;
      if (skip.count(r) || reds[r].first != tn->users[0] || reds[r].second.input != t) continue;
      if (!StatsRowsOf(reds[r].second, op, &rows)) continue;
      out[k] = r;
      break;
    }
  }
  return out;
}

GemmSchedule WithStatsTile(GemmSchedule s, const GemmOp& op) {
  const int64_t per = ConvRowsPerImage(op);
  while (s.bm > 16 && s.bm > per) s.bm /= 2;
  return s;
}

int64_t StatsSlots(const GemmOp& op, const GemmSchedule& s) { return ConvPhases(op) * TilesPerPhase(op, s) * 2; }

void EmitTileStatistics(const GemmOp& op, bool phased, const std::string& value, PyWriter* w) {
  const std::string C = S(op.conv.cout);
  w->Line("# the norm's statistics: per channel, the count, mean and M2 of the rows of each image the tile holds "
          "(its first row's image, then the next one), summed as deviations from the first valid row's value");
  w->Line(std::string("srow = (rm < M)") + (phased ? " & orow" : ""));
  w->Line("ridx = tl.arange(0, BM)");
  w->Line("k0 = tl.sum(tl.where((ridx == tl.min(tl.where(srow, ridx, BM), axis=0))[:, None], " + value +
          ", 0.0), axis=0)");
  w->Line("dv = " + value + " - k0[None, :]");
  w->Line("nb0 = (pid_m * BM) // " + S(ConvRowsPerImage(op)));
  w->Line(std::string("slot = ") + (phased ? "(PHI * num_m + pid_m) * 2" : "pid_m * 2"));
  w->Line("cm = rn < NG");
  for (int seg = 0; seg < 2; ++seg) {
    const std::string s = S(seg);
    w->Line("sr" + s + " = srow & (nb " + (seg ? "!=" : "==") + " nb0)");
    w->Line("sc" + s + " = tl.sum(sr" + s + ".to(tl.float32), axis=0)");
    w->Line("sdm" + s + " = tl.sum(tl.where(sr" + s + "[:, None], dv, 0.0), axis=0) / tl.maximum(sc" + s + ", 1.0)");
    w->Line("sd" + s + " = tl.where(sr" + s + "[:, None], dv - sdm" + s + "[None, :], 0.0)");
    w->Line("tl.store(pc + (slot + " + s + ") * " + C + " + co, tl.zeros([BN], dtype=tl.float32) + sc" + s +
            ", mask=cm)");
    w->Line("tl.store(pm + (slot + " + s + ") * " + C + " + co, k0 + sdm" + s + ", mask=cm)");
    w->Line("tl.store(pq + (slot + " + s + ") * " + C + " + co, tl.sum(sd" + s + " * sd" + s + ", axis=0), mask=cm)");
  }
}

void EmitStatsMerge(const GemmOp& op, const GemmSchedule& s, const ConvStatsTail& tail, size_t k, std::string* src) {
  const int64_t C = op.conv.cout, per = ConvRowsPerImage(op), P = ConvPhases(op), num_m = TilesPerPhase(op, s);
  const std::string CS = S(C);
  PyWriter w;
  w.Line("@triton.jit");
  {
    auto def = w.Open("def _ax_gemm" + S(static_cast<int64_t>(k)) + "_stats_merge(pc, pm, pq, mean, var):");
    w.Line("# " + (tail.norm->kind == "mean" ? std::string("the mean's") : tail.norm->norm_class) +
           " row r's mean and biased variance from the partials of the tiles " +
           "holding its elements (Chan's parallel formula)");
    w.Line("r = tl.program_id(0)");
    // The partials of row r, as [A, B] blocks: `index` lines set slot
    // (and m, the valid entries) for block position i0 of pass loop.
    std::vector<std::string> head, loop, index;
    std::string shape;  // the accumulators' (constexpr) shape
    if (tail.rows.per_channel()) {
      const int64_t slots = StatsSlots(op, s), sb = std::min<int64_t>(1024, Pow2Ceil(slots));
      loop = {"for s0 in range(0, " + S(slots) + ", " + S(sb) + "):"};
      index = {"slot = s0 + tl.arange(0, " + S(sb) + ")", "m = slot < " + S(slots), "at = slot * " + CS + " + r"};
      head = {"sh = tl.load(pm + r)  # the first tile's, of image 0"};
      shape = "[" + S(sb) + "]";
    } else {
      const int64_t G = tail.rows.groups, cpg = C / G, cb = Pow2Ceil(cpg);
      const int64_t tb = std::max<int64_t>(1, std::min(Pow2Ceil(per / s.bm + 2), std::max<int64_t>(1, 4096 / cb)));
      head = {"n = r // " + S(G), "c = (r % " + S(G) + ") * " + S(cpg) + " + tl.arange(0, " + S(cb) + ")[None, :]",
              "cmask = tl.arange(0, " + S(cb) + ")[None, :] < " + S(cpg), "t_lo = (n * " + S(per) + ") // " + S(s.bm),
              "t_hi = ((n + 1) * " + S(per) + " - 1) // " + S(s.bm),
              "# the mean of the group's first channel in the first tile of image n (phase 0)",
              "sh = tl.load(pm + (t_lo * 2 + tl.where((t_lo * " + S(s.bm) + ") // " + S(per) + " == n, 0, 1)) * " + CS +
                  " + (r % " + S(G) + ") * " + S(cpg) + ")"};
      shape = "[" + S(tb) + ", " + S(cb) + "]";
      // an image's rows span at most `span` tiles (constant trip counts)
      const int64_t span = (per - 1) / s.bm + 2;
      loop = {"for p in range(0, " + S(P) + "):", "for t0 in range(0, " + S(span) + ", " + S(tb) + "):"};
      index = {"t = t_lo + t0 + tl.arange(0, " + S(tb) + ")[:, None]", "m = (t <= t_hi) & cmask",
               "slot = (p * " + S(num_m) + " + t) * 2 + tl.where((t * " + S(s.bm) + ") // " + S(per) + " == n, 0, 1)",
               "at = slot * " + CS + " + c"};
    }
    for (const auto& l : head) w.Line(l);
    auto passes = [&](const std::string& what, const std::vector<std::string>& body) {
      w.Line(what);
      std::vector<PyWriter::Block> open;
      open.reserve(loop.size());
      for (const auto& l : loop) open.push_back(w.Open(l));
      for (const auto& l : index) w.Line(l);
      for (const auto& l : body) w.Line(l);
      while (!open.empty()) open.pop_back();
    };
    w.Line("cnt = tl.zeros(" + shape + ", dtype=tl.float32)");
    w.Line("sm = tl.zeros(" + shape + ", dtype=tl.float32)");
    passes("# the count and the mean, summed as deviations from the first partial's mean (sh)",
           {"pcount = tl.load(pc + at, mask=m, other=0.0)", "cnt += pcount",
            "sm += pcount * (tl.load(pm + at, mask=m, other=0.0) - sh)"});
    // the sum of an accumulator's every entry
    auto total = [&](const std::string& a) {
      return tail.rows.per_channel() ? "tl.sum(" + a + ", axis=0)" : "tl.sum(tl.sum(" + a + ", axis=1), axis=0)";
    };
    w.Line("total = " + total("cnt"));
    w.Line("mu = sh + " + total("sm") + " / total");
    w.Line("q = tl.zeros(" + shape + ", dtype=tl.float32)");
    passes("# M2: each partial's own, and its count times its mean's squared distance from the row's",
           {"pcount = tl.load(pc + at, mask=m, other=0.0)", "dm = tl.load(pm + at, mask=m, other=0.0) - mu",
            "q += tl.load(pq + at, mask=m, other=0.0) + pcount * dm * dm"});
    w.Line("tl.store(mean + r, mu)");
    w.Line("tl.store(var + r, " + total("q") + " / total)");
  }
  *src += w.str() + "\n\n";
}

void EmitStatsAlloc(const GemmOp& op, const GemmSchedule& s, PyWriter* w) {
  const std::string shape = "(" + S(StatsSlots(op, s)) + ", " + S(op.conv.cout) + ")";
  w->Line("# the norm's partial statistics: two slots per tile (the images of its first and next rows), per channel");
  for (const char* p : {"pc", "pm", "pq"}) {
    w->Line(std::string(p) + " = torch.empty(" + shape + ", device=x.device, dtype=torch.float32)");
  }
}

void EmitStatsMergeCall(const GemmOp& op, const GemmSchedule& s, const ConvStatsTail& tail, size_t k, PyWriter* w) {
  const int64_t rows = tail.norm->geo.rows;  // one program per norm row
  for (const char* v : {"mean", "var"}) {
    w->Line(std::string(v) + " = torch.empty((" + S(rows) + ",), device=x.device, dtype=torch.float32)");
  }
  w->Line("_ax_gemm" + S(static_cast<int64_t>(k)) + "_stats_merge[(" + S(rows) + ",)](pc, pm, pq, mean, var, num_warps=4)");
}

}  // namespace ax::builtin

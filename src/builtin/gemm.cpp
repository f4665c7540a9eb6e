#include "builtin/gemm.h"


#include "builtin/conv.h"
#include "builtin/ewgen.h"
#include "builtin/gemm_reduce.h"
#include "builtin/reduce.h"

namespace ax::builtin {

using json = nlohmann::json;

bool GemmSchedule::Valid() const {
  auto pow2 = [](int v) { return v > 0 && (v & (v - 1)) == 0; };
  return pow2(bm) && pow2(bn) && pow2(bk) && bm >= 16 && bm <= 4096 && bn >= 1 && bn <= 256 && bk >= 8 &&
         bk <= 256 && group_m >= 1 && group_m <= 64 && pow2(warps) && warps <= 16 && stages >= 1 && stages <= 6 &&
         SharedBytes() <= 200 * 1024;
}

bool GemmSchedule::ValidForDot() const { return Valid() && bm <= 256 && bn >= 16; }

GemmSchedule DefaultBatchedSchedule(const GemmOp& op) {
  auto fit = [](int64_t v, int lo, int hi) {
    int p = lo;
    while (p < hi && p < v) p *= 2;
    return p;
  };
  GemmSchedule s;
  s.bm = fit(op.M, 16, 128);
  s.bn = fit(op.N, 16, 128);
  s.bk = fit(op.K, 16, 64);
  s.warps = s.bm * s.bn >= 128 * 64 ? 8 : 4;
  return s;
}

int64_t GemmOp::Batch() const {
  int64_t b = 1;
  for (int64_t d : batch) b *= d;
  return b;
}

bool ClassifyGemm(const Graph& g, const Node& n, GemmOp* out) {
  if (!n.is_tensor || n.dtype != "torch.float32") return false;
  auto tensor_arg = [&](size_t i) -> const Node* {
    if (i >= n.args.size() || !n.args[i].is_object() || !n.args[i].contains("node")) return nullptr;
    const Node* x = g.Find(n.args[i]["node"].get<std::string>());
    return x && x->is_tensor && x->dtype == "torch.float32" && !x->shape.empty() ? x : nullptr;
  };
  GemmOp op;
  const Node* x = tensor_arg(0);
  if (!x || !n.kwargs.empty()) return false;
  op.K = x->shape.back();
  if (n.op == "call_module" && n.ModuleClass() == "Linear") {
    if (n.args.size() != 1) return false;
    const json& attrs = n.module.contains("attrs") ? n.module["attrs"] : json::object();
    const json& params = n.module.contains("params") ? n.module["params"] : json::object();
    if (!attrs.contains("in_features") || !attrs.contains("out_features") || !params.contains("weight")) return false;
    op.N = attrs["out_features"].get<int64_t>();
    if (attrs["in_features"].get<int64_t>() != op.K) return false;
    const json& w = params["weight"];
    if (w.value("dtype", "") != "torch.float32" ||
        w.value("shape", std::vector<int64_t>{}) != std::vector<int64_t>{op.N, op.K}) {
      return false;
    }
    op.has_bias = AttrOr(attrs, "bias", false);
    if (op.has_bias && (!params.contains("bias") || params["bias"].value("dtype", "") != "torch.float32")) return false;
    op.module = n.target;
  } else if (const Node* y = tensor_arg(1);
             y && y->shape.size() >= 3 && n.args.size() == 2 &&
             ((n.op == "call_function" && (n.callable == "torch.matmul" || n.callable == "torch.bmm" ||
                                           n.callable == "operator.matmul")) ||
              (n.op == "call_method" && (n.target == "matmul" || n.target == "bmm")))) {
    // a batched product: x [B..., M, K] @ y [B..., K, N], the same batch dimensions
    const size_t r = y->shape.size();
    if (x->shape.size() != r || y->shape[r - 2] != op.K) return false;
    if ((n.callable == "torch.bmm" || n.target == "bmm") && r != 3) return false;
    op.batch.assign(x->shape.begin(), x->shape.end() - 2);
    if (std::vector<int64_t>(y->shape.begin(), y->shape.end() - 2) != op.batch) return false;
    if (op.Batch() <= 0 || op.Batch() > 65535) return false;
    op.linear = false;
    op.other = y->name;
    op.M = x->shape[r - 2];
    op.N = y->shape[r - 1];
  } else if ((n.op == "call_function" &&
              (n.callable == "torch.matmul" || n.callable == "torch.mm" || n.callable == "operator.matmul")) ||
             (n.op == "call_method" && (n.target == "matmul" || n.target == "mm"))) {
    const Node* y = tensor_arg(1);
    if (n.args.size() != 2 || !y || y->shape.size() != 2 || y->shape[0] != op.K) return false;
    if ((n.target == "mm" || n.callable == "torch.mm") && x->shape.size() != 2) return false;
    if (x->shape.size() < 2) return false;  // a vector times a matrix: left to PyTorch
    op.linear = false;
    op.other = y->name;
    op.N = y->shape[1];
  } else {
    return false;
  }
  if (!op.Batched()) {  // x's leading dimensions as the rows
    op.M = 1;
    for (size_t i = 0; i + 1 < x->shape.size(); ++i) op.M *= x->shape[i];
  }
  op.in_shape = x->shape;
  op.out_shape = x->shape;
  op.out_shape.back() = op.N;
  if (n.shape != op.out_shape || op.M <= 0 || op.N <= 0 || op.K <= 0) return false;
  op.input = x->name;
  *out = std::move(op);
  return true;
}

std::vector<std::string> KernelOutputs(const Group* epi, const ColumnTail* column) {
  const size_t n = column ? ColumnOutputs(*column) : epi ? epi->outputs.size() : 1;
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back("out" + std::to_string(i));
  return out;
}

void AppendKernelInputs(const Group* epi, size_t self, const ColumnTail* column, std::vector<std::string>* params) {
  if (epi) {
    for (size_t i = 0; i < epi->inputs.size(); ++i) {
      if (i != self) params->push_back("in" + std::to_string(i));
    }
  }
  if (column && column->post) {
    for (size_t i = 0; i < column->post->inputs.size(); ++i) {
      if (column->post->inputs[i] != column->node) params->push_back("pin" + std::to_string(i));
    }
  }
}

Status EmitAccumulatorStore(const Graph& g, const Group* epi, size_t self, PyWriter* w, const ColumnStore* column,
                            std::string* value, bool store, const StoreRemaps* remaps) {
  if (value) *value = "acc";
  if (!epi) {
    if (column) return EmitColumnReduction(g, *column, "acc", w);
    if (store) w->Line("tl.store(out0 + " + StoreIndex("offs", RemapOf(remaps, 0)) + ", acc, mask=mask)");
    return Status::Ok();
  }
  std::map<std::string, std::string> names;
  for (size_t i = 0; i < epi->inputs.size(); ++i) {
    const std::string si = std::to_string(i);
    if (i == self) {
      names[epi->inputs[i]] = "acc";
      continue;
    }
    const Node& in = *g.Find(epi->inputs[i]);
    names[epi->inputs[i]] = in.is_number ? "in" + si : "x" + si;
    if (!in.is_number) InputLoad(w, in, *epi, i, "x" + si, "mask");
  }
  Status st = RenderGroupOps(g, *epi, w, &names);
  if (!st.ok()) return st;
  if (column) {
    if (epi->outputs.size() != 1) return Status::Error("a column reduction after an epilogue of several outputs");
    return EmitColumnReduction(g, *column, names.at(epi->outputs[0]), w);
  }
  for (size_t i = 0; store && i < epi->outputs.size(); ++i) {
    w->Line("tl.store(out" + std::to_string(i) + " + " + StoreIndex("offs", RemapOf(remaps, i)) + ", " +
            names.at(epi->outputs[i]) + ", mask=mask)");
  }
  if (value) *value = names.at(epi->outputs[0]);
  return Status::Ok();
}

Status EmitGemm(const Graph& g, const Node& linear, const GemmOp& op, size_t k, const GemmSchedule& s,
                const Group* epi, std::string* src, const ColumnTail* column, const ConvStatsTail* stats,
                const StoreRemaps* remaps) {
  if (op.IsConv()) return EmitConv(g, linear, op, k, s, epi, src, column, stats, remaps);
  if (column && remaps && !remaps->empty()) return Status::Error("a column reduction stored into a concatenation");
  if (stats) return Status::Error("norm statistics in a matrix product's kernel");
  if (!s.ValidForDot()) return Status::Error("a GEMM schedule out of range");
  if (column && (!ReducesColumns(*column->op, op) || s.bn < op.N)) {
    return Status::Error("a column reduction that one tile of the GEMM does not hold");
  }
  size_t self = 0;  // the epilogue's input that is C
  if (epi) {
    auto pos = std::find(epi->inputs.begin(), epi->inputs.end(), linear.name);
    if (pos == epi->inputs.end() || epi->shape != op.out_shape) return Status::Error("an epilogue that does not read C");
    self = static_cast<size_t>(pos - epi->inputs.begin());
  }
  const int64_t numel = op.Batch() * op.M * op.N;
  const bool wide = numel >= kInt32Elements;
  const bool batched = op.Batched();
  if (batched && column) return Status::Error("a column reduction in a batched product's kernel");
  auto S = [](int64_t v) { return std::to_string(v); };
  std::vector<std::string> params = {"a", "b", "bias"};
  const std::vector<std::string> outputs = KernelOutputs(epi, column);
  AppendKernelInputs(epi, self, column, &params);
  params.insert(params.end(), outputs.begin(), outputs.end());
  const std::vector<int64_t> out_shape = column ? ColumnOutShape(*column) : op.out_shape;

  PyWriter w;
  const std::string kname = "_ax_gemm_kernel" + std::to_string(k);
  w.Line("@triton.jit");
  {
    std::string sig;
    for (const auto& p : params) sig += p + ", ";
    auto kernel = w.Open("def " + kname + "(" + sig +
                         "M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, " +
                         (batched ? "SAB: tl.constexpr, SBB: tl.constexpr, " : "") +
                         "SAM: tl.constexpr, SAK: tl.constexpr, "
                         "SBK: tl.constexpr, SBN: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, "
                         "GROUP_M: tl.constexpr):");
    std::string what = std::string("# C = A @ B") + (op.has_bias ? " + bias" : "") + " (A [M, K], B [K, N]" +
                       (op.linear ? " = the Linear's weight transposed" : "") +
                       (batched ? ", one product per batch (program axis 1)" : "") +
                       ", read through their strides), fp32 accumulation, split-TF32 (3-pass) products";
    if (epi) {
      what += "; epilogue: ";
      for (size_t j = 0; j < epi->nodes.size(); ++j) what += (j ? ", " : "") + epi->ops.at(epi->nodes[j]).fn;
    }
    if (column) what += "; then " + ColumnTailDescription(*column, "the columns");
    w.Line(what);
    // Programs walk the tiles in groups of GROUP_M rows (the B tiles they
    // share stay in L2).
    w.Line("pid = tl.program_id(0)");
    w.Line("num_m = tl.cdiv(M, BM)");
    w.Line("num_n = tl.cdiv(N, BN)");
    w.Line("width = GROUP_M * num_n");
    w.Line("first_m = (pid // width) * GROUP_M");
    w.Line("size_m = tl.minimum(num_m - first_m, GROUP_M)");
    w.Line("pid_m = first_m + (pid % width) % size_m");
    w.Line("pid_n = (pid % width) // size_m");
    w.Line("rm = pid_m * BM + tl.arange(0, BM)");
    w.Line("rn = pid_n * BN + tl.arange(0, BN)");
    w.Line("rk = tl.arange(0, BK)");
    w.Line("# rows and columns past the edge wrap around (valid addresses); their results are not stored");
    if (batched) {
      w.Line("pb = tl.program_id(1)  # the batch");
      w.Line("a = a + pb.to(tl.int64) * SAB");
      w.Line("b = b + pb.to(tl.int64) * SBB");
    }
    w.Line("a_ptr = a + (rm % M).to(tl.int64)[:, None] * SAM + rk[None, :] * SAK");
    w.Line("b_ptr = b + rk[:, None] * SBK + (rn % N).to(tl.int64)[None, :] * SBN");
    w.Line("acc = tl.zeros((BM, BN), dtype=tl.float32)");
    {
      auto loop = w.Open("for kk in range(0, tl.cdiv(K, BK)):");
      if (op.K % s.bk == 0) {
        w.Line("at = tl.load(a_ptr)");
        w.Line("bt = tl.load(b_ptr)");
      } else {
        w.Line("kmask = rk < K - kk * BK");
        w.Line("at = tl.load(a_ptr, mask=kmask[None, :], other=0.0)");
        w.Line("bt = tl.load(b_ptr, mask=kmask[:, None], other=0.0)");
      }
      w.Line("acc = tl.dot(at, bt, acc, input_precision=\"tf32x3\")");
      w.Line("a_ptr += BK * SAK");
      w.Line("b_ptr += BK * SBK");
    }
    if (op.has_bias) w.Line("acc += tl.load(bias + rn % N)[None, :]");
    w.Line("mask = (rm[:, None] < M) & (rn[None, :] < N)");
    const std::string row = batched ? "(pb * M + rm)" : "rm";  // the row of C (of all batches)
    w.Line(wide ? "offs = " + row + ".to(tl.int64)[:, None] * N + rn[None, :]" : "offs = " + row + "[:, None] * N + rn[None, :]");
    ColumnStore cs;
    if (column) cs = {*column, "rm", "rm < M", "(rn < N)[None, :]"};
    Status st = EmitAccumulatorStore(g, epi, self, &w, column ? &cs : nullptr, nullptr, true, remaps);
    if (!st.ok()) return st;
  }
  w.Line().Line();
  {
    std::string sig = op.linear ? "x, mod" : "x, y";
    if (epi) {
      for (size_t i = 0; i < epi->inputs.size(); ++i) {
        if (i != self) sig += ", in" + std::to_string(i);
      }
    }
    sig += ColumnPostSignature(column) + DstParams(remaps);
    auto launcher = w.Open("def _ax_gemm" + std::to_string(k) + "(" + sig + "):");
    w.Line("assert list(x.shape) == " + PyShape(op.in_shape) + ", \"the kernel was generated for the traced shapes\"");
    if (batched) {
      // the batch dimensions as one (a view where they are laid out as one)
      std::vector<int64_t> yshape = op.batch;
      yshape.push_back(op.K);
      yshape.push_back(op.N);
      w.Line("assert list(y.shape) == " + PyShape(yshape));
      w.Line("a = x.reshape(" + S(op.Batch()) + ", " + S(op.M) + ", " + S(op.K) + ")");
      w.Line("b = y.reshape(" + S(op.Batch()) + ", " + S(op.K) + ", " + S(op.N) + ")");
    } else {
      w.Line("a = x if x.dim() == 2 else x.reshape(" + S(op.M) + ", " + S(op.K) + ")");
    }
    if (op.linear) {
      w.Line("assert list(mod.weight.shape) == [" + S(op.N) + ", " + S(op.K) + "]");
      w.Line("b = mod.weight.t()");
    } else if (!batched) {
      w.Line("assert list(y.shape) == [" + S(op.K) + ", " + S(op.N) + "]");
      w.Line("b = y");
    }
    if (epi) {
      for (size_t i = 0; i < epi->inputs.size(); ++i) {
        if (i != self) InputPrelude(&w, *g.Find(epi->inputs[i]), i);
      }
    }
    ColumnPostPrelude(g, column, &w);
    for (size_t i = 0; i < outputs.size(); ++i) {
      OutputPrelude(&w, outputs[i], i, out_shape, "x.device", "torch.float32", remaps);
    }
    w.Line("grid = (triton.cdiv(" + S(op.M) + ", " + std::to_string(s.bm) + ") * triton.cdiv(" + S(op.N) + ", " +
           std::to_string(s.bn) + ")," + (batched ? " " + S(op.Batch()) : "") + ")");
    std::string call = kname + "[grid](a, b, " + (op.has_bias ? "mod.bias" : "b");
    for (size_t i = 3; i < params.size(); ++i) call += ", " + params[i];
    const int o = batched ? 1 : 0;  // the first matrix dimension's position in a and b
    call += ", M=" + S(op.M) + ", N=" + S(op.N) + ", K=" + S(op.K) +
            (batched ? ", SAB=a.stride(0), SBB=b.stride(0)" : "") + ", SAM=a.stride(" + S(o) + "), SAK=a.stride(" +
            S(o + 1) + "), SBK=b.stride(" + S(o) + "), SBN=b.stride(" + S(o + 1) + "), BM=" + std::to_string(s.bm) +
            ", BN=" + std::to_string(s.bn) + ", BK=" + std::to_string(s.bk) + ", GROUP_M=" + std::to_string(s.group_m) +
            ", num_warps=" + std::to_string(s.warps) + ", num_stages=" + std::to_string(s.stages) + ")";
    w.Line(call);
    std::string ret = "return ";
    for (size_t i = 0; i < outputs.size(); ++i) ret += (i ? ", " : "") + outputs[i];
    w.Line(ret);
  }
  w.Line().Line();
  *src += w.str();
  return Status::Ok();
}

}  // namespace ax::builtin

#include "builtin/graph_capture.h"

#include <algorithm>
#include <set>

namespace ax::builtin {

const char* CudaGraphHelper() {
  return R"PY(def _ax_graph_key(args):
    key = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), a.stride(), a.dtype, a.device))
        else:
            key.append((type(a).__name__, a))
    return tuple(key)


def _ax_graph_clone(v):
    if isinstance(v, torch.Tensor):
        return v.clone()
    if type(v) in (tuple, list):
        return type(v)(_ax_graph_clone(x) for x in v)
    return v


def _ax_graph_capture(forward, args):
    static = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # compilation and library workspaces, outside the capture
            forward(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            out = forward(*static)
    except Exception as exc:
        raise RuntimeError("the forward cannot be captured in a CUDA graph: %s" % exc) from None
    return graph, static, out


def _ax_graphed(module, forward, args, stale=None):
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if (not tensors or not all(t.is_cuda for t in tensors) or len({t.device for t in tensors}) != 1
            or torch.cuda.is_current_stream_capturing()):
        return forward(*args)
    graphs = module.__dict__.setdefault("_ax_graphs", {})
    try:
        key = _ax_graph_key(args)
        entry = graphs.get(key)
    except TypeError:  # an argument that cannot be a key
        return forward(*args)
    if entry is None or (stale is not None and stale()):  # stale: what the graph read was rewritten
        with torch.cuda.device(tensors[0].device):
            entry = graphs[key] = _ax_graph_capture(forward, args)
    graph, static, out = entry
    for dst, src in zip(static, args):
        if isinstance(dst, torch.Tensor):
            dst.copy_(src)
    graph.replay()
    return _ax_graph_clone(out)


)PY";
}

namespace {

const std::set<std::string>& NoLaunch() {
  static const std::set<std::string> k = {
      "view",  "reshape", "flatten", "permute", "transpose", "t",     "unsqueeze", "squeeze", "expand",
      "expand_as", "view_as", "size", "dim", "getitem", "unflatten", "narrow", "chunk", "split", "unbind", "numel"};
  return k;
}

const std::set<std::string>& NoLaunchModules() {
  static const std::set<std::string> k = {"Flatten", "Unflatten", "Identity"};
  return k;
}

// An operator that launches work when PyTorch runs it.
bool Launches(const Node& n) {
  if (n.op == "call_module") return !NoLaunchModules().count(n.ModuleClass());
  return (n.op == "call_function" || n.op == "call_method") && n.is_tensor && !NoLaunch().count(n.target);
}

}  // namespace

int OperatorLaunches(const Graph& g, const Node& n) {
  if (!Launches(n)) return 0;
  const std::string cls = n.ModuleClass();
  if (cls != "LSTM" && cls != "GRU" && cls != "RNN") return 1;
  // A recurrent module left whole steps through its sequence: a launch per
  // step, layer and direction at the least.
  const nlohmann::json& attrs = n.module.is_object() ? n.module["attrs"] : nlohmann::json();
  const Node* x = nullptr;
  if (!n.args.empty()) {
    std::vector<std::string> refs;
    CollectNodeRefs(n.args[0], &refs);
    if (refs.size() == 1) x = g.Find(refs[0]);
  }
  int64_t steps = 1;
  if (x && x->shape.size() == 3) steps = x->shape[AttrOr(attrs, "batch_first", false) ? 1 : 0];
  else if (x && x->shape.size() == 2) steps = x->shape[0];
  const int64_t layers = std::max<int64_t>(1, AttrOr<int64_t>(attrs, "num_layers", 1));
  const int64_t dirs = AttrOr(attrs, "bidirectional", false) ? 2 : 1;
  return static_cast<int>(std::min<int64_t>(steps * layers * dirs, 1 << 20));
}

namespace {

int64_t ItemSize(const std::string& dtype) {
  if (dtype == "torch.float16" || dtype == "torch.bfloat16" || dtype == "torch.int16") return 2;
  if (dtype == "torch.float64" || dtype == "torch.int64") return 8;
  if (dtype == "torch.bool" || dtype == "torch.uint8" || dtype == "torch.int8") return 1;
  return 4;
}

}  // namespace

int64_t ForwardOutputBytes(const Graph& g) {
  int64_t bytes = 0;
  for (const Node& n : g.nodes) {
    if (!Launches(n) || !n.is_tensor) continue;
    int64_t numel = 1;
    for (int64_t d : n.shape) numel *= d;
    bytes += numel * ItemSize(n.dtype);
  }
  return bytes;
}

int ForwardLaunches(const Graph& g, const FusedSchedule& s) {
  std::set<int> covered(s.unused.begin(), s.unused.end());
  for (const auto& grp : s.groups) covered.insert(grp.nodes.begin(), grp.nodes.end());
  for (const auto& r : s.reds) covered.insert(r.first);
  for (const auto& m : s.gemms) covered.insert(m.first);
  for (const auto& r : s.rnorms) covered.insert(r.first);
  for (const auto& a : s.attns) covered.insert(a.first);
  int steps = 0;  // a recurrent kernel's launches past its first
  for (const auto& r : s.rnns) {
    covered.insert(r.first);
    steps += static_cast<int>(std::min<int64_t>(r.second.Launches() - 1, 1 << 20));
  }
  int library = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!covered.count(static_cast<int>(i))) library += OperatorLaunches(g, g.nodes[i]);
  }
  return s.TritonKernels() + steps + library;
}

}  // namespace ax::builtin

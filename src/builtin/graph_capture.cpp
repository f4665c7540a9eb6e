#include "builtin/graph_capture.h"

#include <set>

#include "builtin/pywriter.h"

namespace ax::builtin {

std::string CudaGraphHelper() {
  PyWriter w;
  {
    auto f = w.Open("def _ax_graph_key(args):");
    w.Line("key = []");
    {
      auto loop = w.Open("for a in args:");
      {
        auto t = w.Open("if isinstance(a, torch.Tensor):");
        w.Line("key.append((tuple(a.shape), a.stride(), a.dtype, a.device))");
      }
      auto e = w.Open("else:");
      w.Line("key.append((type(a).__name__, a))");
    }
    w.Line("return tuple(key)");
  }
  w.Line().Line();
  {
    auto f = w.Open("def _ax_graph_clone(v):");
    {
      auto t = w.Open("if isinstance(v, torch.Tensor):");
      w.Line("return v.clone()");
    }
    {
      auto t = w.Open("if type(v) in (tuple, list):");
      w.Line("return type(v)(_ax_graph_clone(x) for x in v)");
    }
    w.Line("return v");
  }
  w.Line().Line();
  {
    auto f = w.Open("def _ax_graph_capture(forward, args):");
    w.Line("static = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]");
    w.Line("side = torch.cuda.Stream()");
    w.Line("side.wait_stream(torch.cuda.current_stream())");
    {
      auto s = w.Open("with torch.cuda.stream(side):");
      auto loop = w.Open("for _ in range(2):  # compilation and library workspaces, outside the capture");
      w.Line("forward(*static)");
    }
    w.Line("torch.cuda.current_stream().wait_stream(side)");
    w.Line("graph = torch.cuda.CUDAGraph()");
    {
      auto t = w.Open("try:");
      auto c = w.Open("with torch.cuda.graph(graph, capture_error_mode=\"thread_local\"):");
      w.Line("out = forward(*static)");
    }
    {
      auto e = w.Open("except Exception as exc:");
      w.Line("raise RuntimeError(\"the forward cannot be captured in a CUDA graph: %s\" % exc) from None");
    }
    w.Line("return graph, static, out");
  }
  w.Line().Line();
  {
    auto f = w.Open("def _ax_graphed(module, forward, args):");
    w.Line("tensors = [a for a in args if isinstance(a, torch.Tensor)]");
    {
      auto t = w.Open(
          "if (not tensors or not all(t.is_cuda for t in tensors) or len({t.device for t in tensors}) != 1\n"
          "        or torch.cuda.is_current_stream_capturing()):");
      w.Line("return forward(*args)");
    }
    w.Line("graphs = module.__dict__.setdefault(\"_ax_graphs\", {})");
    {
      auto t = w.Open("try:");
      w.Line("key = _ax_graph_key(args)");
      w.Line("entry = graphs.get(key)");
    }
    {
      auto e = w.Open("except TypeError:  # an argument that cannot be a key");
      w.Line("return forward(*args)");
    }
    {
      auto t = w.Open("if entry is None:");
      {
        auto d = w.Open("with torch.cuda.device(tensors[0].device):");
        w.Line("entry = graphs[key] = _ax_graph_capture(forward, args)");
      }
    }
    w.Line("graph, static, out = entry");
    {
      auto loop = w.Open("for dst, src in zip(static, args):");
      auto t = w.Open("if isinstance(dst, torch.Tensor):");
      w.Line("dst.copy_(src)");
    }
    w.Line("graph.replay()");
    w.Line("return _ax_graph_clone(out)");
  }
  w.Line().Line();
  return w.str();
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
  int library = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!covered.count(static_cast<int>(i)) && Launches(g.nodes[i])) ++library;
  }
  return s.TritonKernels() + library;
}

}  // namespace ax::builtin

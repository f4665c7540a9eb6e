#include "builtin/cat_slots.h"

#include <algorithm>

#include "builtin/ewgen.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace {

int64_t ProductFrom(const std::vector<int64_t>& shape, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < shape.size(); ++i) p *= shape[i];
  return p;
}

}  // namespace

std::string CatOp::Slice(const std::string& var, size_t p) const {
  const CatPiece& c = pieces.at(p);
  if (stack) return var + ".select(" + std::to_string(dim) + ", " + std::to_string(c.offset) + ")";
  return var + ".narrow(" + std::to_string(dim) + ", " + std::to_string(c.offset) + ", " + std::to_string(c.size) + ")";
}

std::string StoreIndex(const std::string& offs, const StoreRemap* r) {
  if (!r) return offs;
  const std::string o = r->wide ? offs + ".to(tl.int64)" : offs;
  if (r->inner == r->ostride) return o;  // the slice is contiguous
  if (r->inner == 1) return o + " * " + std::to_string(r->ostride);  // a stack over the last dimension
  const std::string i = std::to_string(r->inner);
  return "(" + o + " // " + i + ") * " + std::to_string(r->ostride) + " + " + o + " % " + i;
}

const StoreRemap* RemapOf(const StoreRemaps* rs, size_t i) {
  if (!rs) return nullptr;
  auto it = rs->find(i);
  return it == rs->end() ? nullptr : &it->second;
}

StoreRemaps CatSlots::RemapsOf(const std::vector<std::string>& outputs) const {
  StoreRemaps out;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (auto it = slot_of.find(outputs[i]); it != slot_of.end()) out[i] = it->second.remap;
  }
  return out;
}

bool ParseCat(const Graph& g, const Node& n, CatOp* out) {
  static const std::set<std::string> kCats = {"torch.cat", "torch.concat", "torch.concatenate"};
  if (n.op != "call_function" || !n.is_tensor || !IsFloatDtype(n.dtype) || n.shape.empty()) return false;
  CatOp c;
  c.stack = n.callable == "torch.stack";
  if (!c.stack && !kCats.count(n.callable)) return false;
  for (const auto& [k, v] : n.kwargs.items()) {
    if (k != "dim" && k != "axis" && k != "tensors") return false;  // out=, ...
  }
  const json* list = n.Arg(0, "tensors");
  const json* dim = n.Arg(1, n.kwargs.contains("axis") ? "axis" : "dim");
  if (!list || !list->is_object() || n.args.size() > 2) return false;
  const json* items = list->contains("list") ? &(*list)["list"] : list->contains("tuple") ? &(*list)["tuple"] : nullptr;
  if (!items || !items->is_array() || items->empty()) return false;
  const int rank = static_cast<int>(n.shape.size());
  int64_t d = 0;
  if (dim && !dim->is_null()) {
    if (!dim->contains("value") || !(*dim)["value"].is_number_integer()) return false;
    d = (*dim)["value"].get<int64_t>();
  }
  if (d < 0) d += rank;
  if (d < 0 || d >= rank) return false;
  c.node = g.index.count(n.name) ? g.index.at(n.name) : -1;
  c.dim = static_cast<int>(d);
  c.shape = n.shape;
  c.dtype = n.dtype;
  std::set<std::string> seen;
  int64_t at = 0;
  for (const auto& it : *items) {
    if (!it.is_object() || !it.contains("node") || !it["node"].is_string()) return false;
    const std::string name = it["node"].get<std::string>();
    const Node* p = g.Find(name);
    if (!p || !p->is_tensor || p->dtype != n.dtype || !seen.insert(name).second) return false;
    std::vector<int64_t> want = n.shape;  // the piece's shape that the result implies
    int64_t size = 1;
    if (c.stack) {
      want.erase(want.begin() + d);
    } else {
      if (p->shape.size() != n.shape.size()) return false;
      size = p->shape[d];
      want[d] = size;
    }
    if (p->shape != want || size <= 0) return false;
    c.pieces.push_back({name, at, size, false});
    at += size;
  }
  if (at != n.shape[d]) return false;
  *out = std::move(c);
  return true;
}

CatSlots FormCatSlots(const Graph& g, const std::set<std::string>& stored, bool device_input) {
  CatSlots s;
  if (!device_input) return s;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    CatOp c;
    if (!ParseCat(g, g.nodes[i], &c)) continue;
    const int64_t ostride = ProductFrom(c.shape, c.dim);
    const bool wide = ProductFrom(c.shape, 0) >= kInt32Elements;
    bool any = false;
    for (size_t p = 0; p < c.pieces.size(); ++p) {
      CatPiece& piece = c.pieces[p];
      const Node& pn = *g.Find(piece.node);
      if (!stored.count(piece.node) || pn.users != std::vector<int>{static_cast<int>(i)}) continue;
      piece.in_place = any = true;
      const int64_t inner = ProductFrom(pn.shape, static_cast<size_t>(c.dim));
      // one block of the piece's elements before the concatenated dimension: its slice is contiguous
      const bool contiguous = ProductFrom(pn.shape, 0) == inner;
      s.slot_of[piece.node] = {s.cats.size(), p, StoreRemap{inner, contiguous ? inner : ostride, wide}};
    }
    if (!any) continue;
    s.cat_of_node[static_cast<int>(i)] = s.cats.size();
    s.cats.push_back(std::move(c));
  }
  return s;
}

}  // namespace ax::builtin

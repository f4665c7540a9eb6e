// Concatenations written in place: `torch.cat` and `torch.stack` whose
// pieces are stored by the generated kernels straight into their slice of
// the result, instead of into a tensor of their own that the concatenation
// then copies.
//
// A piece qualifies when the concatenation is its only reader and a kernel
// the schedule launches stores it at its flat (contiguous) index `offs`: an
// elementwise kernel's output, or a generated GEMM's or convolution's output
// (with or without its epilogue; not one that stores a reduction over its
// columns instead). The kernel then stores the element at flat index i of
// the piece at (i // inner) * ostride + i % inner of the slice's first
// element, where inner is the piece's size from the concatenated dimension
// on and ostride the result's. The forward allocates the result before the
// first such kernel runs, passes each one its slice (a view), and copies the
// other pieces (inputs, library results, pieces read elsewhere too) into
// theirs where the concatenation was. Pure data and decisions, like the
// schedule that computes them.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "builtin/graph.h"

namespace ax::builtin {

// One piece of a concatenation: its node, where its slice starts along the
// concatenated dimension (a stack: its index) and its size there.
struct CatPiece {
  std::string node;
  int64_t offset = 0;
  int64_t size = 1;
  bool in_place = false;  // stored into its slice by the kernel that computes it
};

// A torch.cat or torch.stack of tensors of one floating dtype.
struct CatOp {
  int node = -1;
  bool stack = false;
  int dim = 0;                 // non-negative, in the result's dimensions
  std::vector<int64_t> shape;  // the result's
  std::string dtype;
  std::vector<CatPiece> pieces;
  // The Python expression of piece p's slice of the result held in `var`:
  // var.narrow(dim, offset, size), or var.select(dim, index) for a stack.
  std::string Slice(const std::string& var, size_t p) const;
};

// How a kernel stores one of its outputs into a slice: element i of the
// piece at (i // inner) * ostride + i % inner of the slice's start (inner ==
// ostride: the slice is contiguous, at i).
struct StoreRemap {
  int64_t inner = 1;
  int64_t ostride = 1;
  bool wide = false;  // the result has more elements than int32 indices reach
  bool operator==(const StoreRemap&) const = default;
};

// A kernel's remapped outputs: output index -> remap.
using StoreRemaps = std::map<size_t, StoreRemap>;

// The store index of a kernel's flat offsets `offs` under r (none: offs).
std::string StoreIndex(const std::string& offs, const StoreRemap* r);
// Output i's remap in rs, if it has one (rs may be null).
const StoreRemap* RemapOf(const StoreRemaps* rs, size_t i);

struct CatSlots {
  std::vector<CatOp> cats;  // those with a piece written in place, in graph order
  struct Slot {
    size_t cat = 0;
    size_t piece = 0;
    StoreRemap remap;
  };
  std::map<std::string, Slot> slot_of;  // a piece written in place -> its slice
  std::map<int, size_t> cat_of_node;    // concatenation node -> its entry in cats

  // The remaps of a kernel whose outputs (in order) are these nodes: output
  // index -> remap, for those written into a slice.
  StoreRemaps RemapsOf(const std::vector<std::string>& outputs) const;
};

// Node n as a concatenation the compiler can write in place, if it is one: a
// torch.cat/concat/concatenate or torch.stack of a list or tuple of distinct
// node tensors of the result's floating dtype and rank, the result's shape
// consistent with them.
bool ParseCat(const Graph& g, const Node& n, CatOp* out);

// The concatenations of g with at least one piece that a launched kernel
// stores at its flat index (`stored`: the nodes such kernels store) and that
// the concatenation alone reads. `device_input`: the forward has a tensor
// input (the result is allocated on its device); without one, none.
CatSlots FormCatSlots(const Graph& g, const std::set<std::string>& stored, bool device_input);

}  // namespace ax::builtin

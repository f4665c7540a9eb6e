// The elementwise generator (ewgen.cpp): the pointwise kernel of a group,
// and the helpers every generator that runs an elementwise group shares
// (reduce_fusion.cpp: reduction prologues and epilogues; gemm.cpp and
// conv.cpp: GEMM and convolution epilogues).
#pragma once

#include <map>
#include <string>

#include "builtin/cat_slots.h"
#include "builtin/fuse.h"
#include "builtin/graph.h"
#include "builtin/plan.h"
#include "builtin/pywriter.h"
#include "builtin/schedule.h"
#include "common/status.h"

namespace ax::builtin {

// The group's operators as Triton lines (t_<node> = ...) at w's depth,
// reading the variables in *names (its inputs) and adding its nodes' to it.
Status RenderGroupOps(const Graph& g, const Group& grp, PyWriter* w, std::map<std::string, std::string>* names);

// Launcher lines for plain input i: a number is computed in float32, as
// PyTorch does; a tensor must have the traced shape the kernel was
// specialised to and is made contiguous (a no-op when it is). The input is
// named <prefix><i> in the launcher and the kernel.
void InputPrelude(PyWriter* w, const Node& in, size_t i, const std::string& prefix = "in");

// A kernel line loading tensor input i of grp into var at the group's flat
// index `offs` (a broadcast input through its merged index).
void InputLoad(PyWriter* w, const Node& in, const Group& grp, size_t i, const std::string& var, const std::string& mask,
               const std::string& prefix = "in");

// The position of grp's first tensor input; grp.inputs.size() when it has none.
size_t FirstTensorInput(const Graph& g, const Group& grp);

// One kernel `_ax_kernel<k>` and its launcher `_ax_launch<k>` for group k
// (appended to *kernels), specialised to the traced shapes, which the
// launcher checks; a norm fed to input i (feeds) is applied in the kernel
// from its statistics (the launcher takes the norm's input and module).
// Outputs in `remaps` are stored into a slice of a concatenation
// (cat_slots.h), which the launcher takes as dst<i> after its inputs.
Status EmitGroup(const Graph& g, const Group& grp, size_t k, const KernelSchedule& ks,
                 const std::map<size_t, NormFeed>& feeds, std::string* kernels, const StoreRemaps* remaps = nullptr);

// A launcher's line(s) making kernel output `o` (output i) of that shape and
// dtype on `device`: a new tensor, or its slice dst<i> (checked) where the
// output is remapped.
void OutputPrelude(PyWriter* w, const std::string& o, size_t i, const std::vector<int64_t>& shape,
                   const std::string& device, const std::string& dtype, const StoreRemaps* remaps);
// The launcher parameters of the remapped outputs: ", dst<i>" for each.
std::string DstParams(const StoreRemaps* remaps);

// Groups smaller than this index with int32 arithmetic.
inline constexpr int64_t kInt32Elements = (int64_t{1} << 31) - (int64_t{1} << 20);

}  // namespace ax::builtin

"""nn.LSTM, nn.GRU and nn.RNN as their cell equations over the sequence.

While a forward is traced, a recurrent module whose unrolled cells stay small
(at most NODE_BUDGET operations) becomes its equations, written with torch
operations on the module's own parameters (`lstm.weight_ih_l0`, ...): one input
projection per layer and direction over the whole sequence (`F.linear`), then
per time step the hidden projection and the pointwise gate updates (sigmoid,
tanh, products and sums) that the compiler can fuse. Layers, both directions,
`batch_first`, unbatched inputs, given or zero initial states and PyTorch's
return values (`(output, (h_n, c_n))` for an LSTM, `(output, h_n)` otherwise)
are all as in PyTorch. A larger module (a long sequence times many layers)
stays whole: one PyTorch call.

`lower` takes anything with a `shape` and torch's tensor operations: traced
values record the equations into the graph, tensors just compute them.
"""

import torch
import torch.nn.functional as F

# The most operations the unrolled cells of one module may add to the graph.
NODE_BUDGET = 250

# Operations one time step of one layer and direction adds (see _cell below).
_CELL_NODES = {"LSTM": 17, "GRU": 19, "RNN_TANH": 4, "RNN_RELU": 4}


def _mode(module):
    if type(module) is torch.nn.LSTM:
        return "LSTM"
    if type(module) is torch.nn.GRU:
        return "GRU"
    if type(module) is torch.nn.RNN:
        return "RNN_TANH" if module.nonlinearity == "tanh" else "RNN_RELU"
    return None


def is_recurrent(module):
    return _mode(module) is not None


def cell_nodes(module, input_shape):
    """The operations that unrolling module over an input of input_shape adds,
    or None when it is not a module lowered here."""
    mode = _mode(module)
    if mode is None or len(input_shape) not in (2, 3):
        return None
    steps = input_shape[1] if (module.batch_first and len(input_shape) == 3) else input_shape[0]
    directions = 2 if module.bidirectional else 1
    return steps * module.num_layers * directions * _CELL_NODES[mode]


def _cell(mode, x_proj, h, c, w_hh, b_hh):
    """One time step: x_proj is the input's projection (with its bias)."""
    gh = F.linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = (x_proj + gh).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    if mode == "GRU":
        i_r, i_z, i_n = x_proj.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return n + z * (h - n), None
    pre = x_proj + gh
    return (torch.tanh(pre) if mode == "RNN_TANH" else torch.relu(pre)), None


def lower(module, x, hx, param, budget=NODE_BUDGET):
    """module(x, hx) as its cell equations, or None where it stays whole: too
    many cells for the budget, or a feature not lowered (projections, dropout
    while training, a PackedSequence). param(name) gives the module's
    parameter `name` as a value of the graph."""
    mode = _mode(module)
    if mode is None or getattr(module, "proj_size", 0):
        return None
    if module.training and module.dropout > 0 and module.num_layers > 1:
        return None  # random: PyTorch's own
    try:
        shape = tuple(x.shape)
    except Exception:
        return None
    if not all(isinstance(d, int) for d in shape):
        return None
    count = cell_nodes(module, shape)
    if count is None or count > budget:
        return None
    batched = len(shape) == 3
    layers, directions, hidden = module.num_layers, 2 if module.bidirectional else 1, module.hidden_size
    if not batched:
        x = x.unsqueeze(1)
    elif module.batch_first:
        x = x.transpose(0, 1)
    steps, batch = (shape[1], shape[0]) if (batched and module.batch_first) else (shape[0], shape[1] if batched else 1)

    if hx is None:
        h0 = torch.zeros(layers * directions, batch, hidden, dtype=x.dtype, device=x.device)
        c0 = torch.zeros(layers * directions, batch, hidden, dtype=x.dtype, device=x.device) if mode == "LSTM" else None
    elif mode == "LSTM":
        h0, c0 = hx
        if not batched:
            h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
    else:
        h0, c0 = (hx if batched else hx.unsqueeze(1)), None

    layer_in = x
    h_last, c_last = [], []
    for layer in range(layers):
        outs = []
        for d in range(directions):
            suffix = "_l%d%s" % (layer, "_reverse" if d else "")
            w_ih, w_hh = param("weight_ih" + suffix), param("weight_hh" + suffix)
            b_ih = param("bias_ih" + suffix) if module.bias else None
            b_hh = param("bias_hh" + suffix) if module.bias else None
            x_proj = F.linear(layer_in, w_ih, b_ih)  # [steps, batch, gates * hidden]
            k = layer * directions + d
            h = h0[k]
            c = c0[k] if c0 is not None else None
            ys = [None] * steps
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                h, c = _cell(mode, x_proj[t], h, c, w_hh, b_hh)
                ys[t] = h
            outs.append(torch.stack(ys))
            h_last.append(h)
            c_last.append(c)
        layer_in = outs[0] if directions == 1 else torch.cat(outs, 2)

    output = layer_in
    h_n = torch.stack(h_last)
    c_n = torch.stack(c_last) if mode == "LSTM" else None
    if not batched:
        output = output.squeeze(1)
        h_n = h_n.squeeze(1)
        c_n = c_n.squeeze(1) if c_n is not None else None
    elif module.batch_first:
        output = output.transpose(0, 1)
    return (output, (h_n, c_n)) if mode == "LSTM" else (output, h_n)


def empty_outputs(module, x, hx=None):
    """What module(x, hx) returns, as empty tensors of the right shapes on x's
    device: PyTorch's own recurrent kernels on the meta device step through
    every cell in Python (seconds for a long sequence), the shapes need none."""
    mode = _mode(module)
    if mode is None or not isinstance(x, torch.Tensor) or x.dim() not in (2, 3):
        return None
    batched = x.dim() == 3
    directions = 2 if module.bidirectional else 1
    if batched:
        steps, batch = (x.shape[1], x.shape[0]) if module.batch_first else (x.shape[0], x.shape[1])
    else:
        steps, batch = x.shape[0], None
    out_size = directions * (module.proj_size or module.hidden_size) if mode == "LSTM" else directions * module.hidden_size
    real_hidden = (module.proj_size or module.hidden_size) if mode == "LSTM" else module.hidden_size
    lead = [batch] if batched else []

    def empty(*dims):
        return torch.empty([d for d in dims if d is not None], dtype=x.dtype, device=x.device)

    output = empty(batch, steps, out_size) if (batched and module.batch_first) else empty(steps, batch, out_size)
    h_n = empty(module.num_layers * directions, *lead, real_hidden)
    if mode == "LSTM":
        return output, (h_n, empty(module.num_layers * directions, *lead, module.hidden_size))
    return output, h_n

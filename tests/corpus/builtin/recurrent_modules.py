# Builtin compiler corpus: recurrent modules too long to unroll (more steps x
# layers x directions than the tracer's lowering budget), so each stays one
# module call: a 3-layer GRU from zero states (one launch per wavefront), a
# 2-layer bidirectional batch-first LSTM from given (h0, c0) whose c_n is
# returned, an 8-layer ReLU RNN without biases over the GRU's output, and a
# 12-layer tanh RNN over one sequence of the batch (an unbatched input).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(5, 12, num_layers=3)
        self.lstm = nn.LSTM(5, 20, num_layers=2, bidirectional=True, batch_first=True)
        self.rnn = nn.RNN(12, 7, num_layers=8, nonlinearity="relu", bias=False)
        self.one = nn.RNN(5, 6, num_layers=12)

    def forward(self, x, h0, c0):
        g, gh = self.gru(x)
        o, (hn, cn) = self.lstm(x.transpose(0, 1), (h0, c0))
        r, _ = self.rnn(g)
        u, uh = self.one(x[:, 0, :])
        return g * 2.0, gh, o, cn, r, u, uh


def get_inputs():
    return [torch.randn(9, 3, 5), torch.randn(4, 3, 20), torch.randn(4, 3, 20)]


def get_init_inputs():
    return []

# Writes a tiny llama-architecture GGUF model (a few hundred KB) for the
# end-to-end test of the compat: backend against llama.cpp's server: a
# bigram model whose greedy reply to any chat prompt is " Hello world!".
# Usage: python make_tiny_gguf.py OUT.gguf
import sys
import numpy as np
import gguf

out = sys.argv[1]
n_embd, n_ff, n_head = 64, 64, 2
toks, types, scores = ["<unk>", "<s>", "</s>"], [2, 3, 3], [0.0, 0.0, 0.0]
for b in range(256):
    toks.append("<0x%02X>" % b); types.append(6); scores.append(0.0)
words = ["\u2581Hello", "\u2581world", "!"]
for w in words:
    toks.append(w); types.append(1); scores.append(-1.0)
V = len(toks)
HELLO, WORLD, BANG, EOS = V - 3, V - 2, V - 1, 2

w = gguf.GGUFWriter(out, "llama")
w.add_context_length(256)
w.add_embedding_length(n_embd)
w.add_block_count(1)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head)
w.add_rope_dimension_count(n_embd // n_head)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(0)
w.add_tokenizer_model("llama")
w.add_token_list(toks)
w.add_token_types(types)
w.add_token_scores(scores)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)
w.add_add_bos_token(True)

# A bigram model: attention and MLP are zero, so the hidden state is the
# current token's embedding and the output matrix picks the next token.
emb = np.zeros((V, n_embd), np.float32)
for t in range(V):
    emb[t, t % 61] = 1.0
emb[HELLO] = 0; emb[HELLO, 61] = 1
emb[WORLD] = 0; emb[WORLD, 62] = 1
emb[BANG] = 0; emb[BANG, 63] = 1
out_w = np.zeros((V, n_embd), np.float32)
out_w[HELLO, :61] = 10
out_w[WORLD, 61] = 20
out_w[BANG, 62] = 20
out_w[EOS, 63] = 20
w.add_tensor("token_embd.weight", emb)
w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
w.add_tensor("output.weight", out_w)
z = lambda *s: np.zeros(s, np.float32)
w.add_tensor("blk.0.attn_norm.weight", np.ones(n_embd, np.float32))
for n in ("q", "k", "v", "output"):
    w.add_tensor("blk.0.attn_%s.weight" % n, z(n_embd, n_embd))
w.add_tensor("blk.0.ffn_norm.weight", np.ones(n_embd, np.float32))
w.add_tensor("blk.0.ffn_gate.weight", z(n_ff, n_embd))
w.add_tensor("blk.0.ffn_up.weight", z(n_ff, n_embd))
w.add_tensor("blk.0.ffn_down.weight", z(n_embd, n_ff))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out)

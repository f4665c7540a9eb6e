"""A scripted OpenAI-compatible chat server for end-to-end tests of `adaexplore optimize`.

It speaks the Chat Completions wire format on POST /v1/chat/completions and
answers by role, recognised from the prompt text:

* proposer: 1st reply a kernel that does not compile, 2nd a wrong kernel
  (SCALE_FIX = 2.0), later ones correct kernels (distinct sources);
* reviser: short guidance;
* tuner: the first attempt of every small step names text that is not in the
  file (a failed edit); the retry fixes what is wrong with the parent (or
  re-tunes a correct one); every third small step fails both attempts.

Modes (Script(mode=...)) for other scenarios:

* "failing": every proposed kernel fails to compile and no edit applies;
* "better": every proposed kernel is correct and launches one Triton program
  over the whole tensor (BLOCK = all 262144 elements of the bundled task),
  far faster in Triton's CPU interpreter than kernels of many small blocks
  (the interpreter's cost grows with the number of programs); no edit applies;
* Script(reject=401 | 403 | 404 | "quota"): every request is refused with
  that HTTP error (quota: 429 insufficient_quota), as a provider that
  rejects the key, the model or the account.
"""

import http.server
import json
import re
import threading
import time

HEADER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

SCALE_FIX = {scale}


@triton.jit
def bias_relu_scale_kernel(x_ptr, b_ptr, out_ptr, n_elements, features, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % features, mask=mask)
    y = tl.maximum(x + b, 0.0) * scale
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = {block}
        bias_relu_scale_kernel[(triton.cdiv(n, BLOCK),)](x, self.bias, out, n, x.shape[-1], self.scale * SCALE_FIX, BLOCK=BLOCK){tail}
        return out
'''


NO_EDIT = ("<old_str_1>\nthis line is not in the file\n</old_str_1>\n"
           "<new_str_1>\nnor is this one\n</new_str_1>\n")

REJECTIONS = {
    401: {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"},
    403: {"message": "You are not allowed to use this model", "type": "permission_error", "code": None},
    404: {"message": "The model `fake` does not exist", "type": "invalid_request_error", "code": "model_not_found"},
    "quota": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"},
}


def kernel(scale="1.0", block=4096, broken=False):
    tail = " +" if broken else ""
    return HEADER.format(scale=scale, block=block, tail=tail)


class Script:
    """Replies are a function of the prompt: the same prompt always gets the
    reply it got the first time (like a model at temperature 0), so a call
    re-asked after a crash gets the same answer."""

    def __init__(self, delay=0.0, always_broken=False, mode=None, reject=None):
        self.delay = delay
        self.always_broken = always_broken
        self.mode = mode
        self.reject = reject
        self.memo = {}
        self.lock = threading.Lock()
        self.counts = {"propose": 0, "revise": 0, "tune": 0}
        self.small_steps = 0
        self.requests = []

    def reply(self, prompt):
        if self.delay:
            time.sleep(self.delay)
        with self.lock:
            self.requests.append(prompt)
            if prompt not in self.memo:
                self.memo[prompt] = self._new_reply(prompt)
            return self.memo[prompt]

    def _new_reply(self, prompt):
        if True:
            if "failed when the judge built or ran it" in prompt:
                return "You cannot leave a binary operator dangling at the end of a line in Python code."
            if self.mode in ("failing", "better"):
                if "Write a new, faster implementation" in prompt:
                    n = self.counts["propose"] = self.counts["propose"] + 1
                    code = kernel(broken=True) if self.mode == "failing" else kernel(block=262144)
                    code += "# variant %d\n" % n
                    return "Here is the kernel.\n\n```python\n%s```\n" % code
                if "reviewing the recent attempts" in prompt:
                    self.counts["revise"] += 1
                    return "- Fuse more."
                self.counts["tune"] += 1
                return NO_EDIT
            if "Write a new, faster implementation" in prompt:
                n = self.counts["propose"] = self.counts["propose"] + 1
                if n == 1 or self.always_broken:
                    code = kernel(broken=True)
                elif n == 2:
                    code = kernel(scale="2.0")
                else:
                    code = kernel(block=[4096, 2048, 1024, 512][(n - 3) % 4]) + "# variant %d\n" % n
                return "Here is the kernel.\n\n```python\n%s```\n" % code
            if "reviewing the recent attempts" in prompt:
                self.counts["revise"] += 1
                return "- Fix what the verdict says is wrong.\n- Keep the block size a power of two."
            if "by editing it" in prompt:
                self.counts["tune"] += 1
                retry = "could not be applied" in prompt
                if not retry:
                    self.small_steps += 1
                    return ("<old_str_1>\nthis line is not in the file\n</old_str_1>\n"
                            "<new_str_1>\nnor is this one\n</new_str_1>\n")
                if self.small_steps % 3 == 0:
                    return ("<old_str_1>\nstill not in the file\n</old_str_1>\n"
                            "<new_str_1>\nx\n</new_str_1>\n")
                src = re.search(r"```python\n(.*?)```", prompt, re.S).group(1)
                if "SCALE_FIX = 2.0" in src:
                    old, new = "SCALE_FIX = 2.0", "SCALE_FIX = 1.0"
                elif "BLOCK=BLOCK) +" in src:
                    old, new = "BLOCK=BLOCK) +", "BLOCK=BLOCK)"
                else:
                    line = re.search(r"SCALE_FIX = 1\.0.*", src).group(0)
                    old, new = line, "SCALE_FIX = 1.0  # tuned %d" % self.small_steps
                return "<old_str_1>\n%s\n</old_str_1>\n<new_str_1>\n%s\n</new_str_1>\n" % (old, new)
            return "I do not know this prompt."


def serve(script):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            if not self.path.endswith("/chat/completions"):
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
            if script.reject is not None:
                with script.lock:
                    script.requests.append(prompt)
                err = json.dumps({"error": REJECTIONS[script.reject]}).encode()
                self.send_response(429 if script.reject == "quota" else script.reject)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(err)))
                self.end_headers()
                self.wfile.write(err)
                return
            text = script.reply(prompt)
            out = json.dumps({
                "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4,
                          "total_tokens": (len(prompt) + len(text)) // 4},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server

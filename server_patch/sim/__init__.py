"""The embedded reference server: a small OpenAI-compatible server that fails for the
same reason vLLM 0.27 did.

Continuous batching of concurrent requests, C128A metadata built every step by
server_patch's builder into persistent buffers, a paged KV pool whose blocks are
recycled between requests, and a decode consumer whose row stride was frozen at
"capture" (a real CUDA graph on `--device cuda`). A toy model follows its script only
while what it reads through that metadata is its own context. So `packed` reproduces
`stuck_in_reasoning` under concurrency, and beside it the quiet faces (another request's
facts in a reply, token salad), and `capacity` / `prefix` do not, with no fault
injected by hand.

(The package imports nothing at load: the loadgen's CLI lists `sim` without torch.)
"""

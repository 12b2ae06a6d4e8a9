"""`dsv4-qual sim`: serve the embedded reference server in the foreground."""

from __future__ import annotations

import click

# Kept torch-free at import: the loadgen's CLI lists this command on every start.
# (A test checks these names equal server_patch.c128a.LAYOUTS.)
LAYOUT_CHOICES = ("packed", "capacity", "prefix")
# (and these equal server_patch.sim.config.GRAPH_MODES)
GRAPH_MODE_CHOICES = ("full_and_piecewise", "full")
# (and these server_patch.sim.config.INDEXER_MODES)
INDEXER_CHOICES = ("runtime", "captured")
BAD_INPUT = 3  # the console script's exit code for bad input


class SimInputError(click.ClickException):
    """What the sim cannot serve with: one line, exit 3, no usage block."""

    exit_code = BAD_INPUT

    def show(self, file: object = None) -> None:
        click.echo(f"dsv4-qual: error: {self.format_message()}", err=True)


@click.command("sim")
@click.option("--layout", type=click.Choice(LAYOUT_CHOICES), default="capacity", show_default=True,
              help="C128A builder layout: packed reproduces the bug, capacity/prefix do not.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="cuda captures the decode consumer in a real CUDA graph.")
@click.option("--graph-mode", type=click.Choice(GRAPH_MODE_CHOICES), default="full_and_piecewise",
              show_default=True,
              help="Which steps replay the captured consumers: full_and_piecewise (pure "
                   "decode only, vLLM 0.27's) or full (mixed steps too, 0.28+ FlashMLA).")
@click.option("--salad-foreign-share", type=click.FloatRange(0, 1), default=0.5,
              show_default=True,
              help="The toy model writes token salad for a stretch, then finishes, when "
                   "more than this share of what one of its rows read is another "
                   "request's KV (1 never).")
@click.option("--cross-talk-foreign-share", type=click.FloatRange(0, 1), default=0.7,
              show_default=True,
              help="The toy model writes another request's facts (its account, its codes) "
                   "instead of its own when more than this share of what one of its rows "
                   "read is another request's KV (1 never).")
@click.option("--fatal-foreign-share", type=click.FloatRange(0, 1), default=0.9,
              show_default=True,
              help="The toy model is lost (loops until max_tokens) when more than this "
                   "share of what one of its rows read is another request's KV (1 never).")
@click.option("--prefix-caching/--no-prefix-caching", default=False, show_default=True,
              help="vLLM's automatic prefix caching: requests that share a prompt prefix "
                   "share its KV blocks (with vLLM's prefix_cache counters on /metrics).")
@click.option("--indexer", type=click.Choice(INDEXER_CHOICES), default="runtime",
              show_default=True,
              help="The sparse indexer's short-context shortcut: runtime (the fix of vLLM "
                   "#52492) or captured (the bug: with a cached prefix, a context over 2048 "
                   "tokens reads the wrong candidates and copies values altered).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on (0: any free one).")
@click.option("--max-num-seqs", type=click.IntRange(1, 4096), default=32, show_default=True,
              help="Requests in the running batch at most (vLLM's --max-num-seqs).")
@click.option("--max-model-len", type=click.IntRange(64, 1_048_576), default=4096,
              show_default=True, help="Prompt plus reply, in the sim's tokens, at most.")
@click.option("--receipts-dir", default=None, help="Write a patch receipt here.")
@click.option("--step-delay", type=click.FloatRange(0, 10), default=0.0, show_default=True,
              help="Seconds to sleep between engine steps (slows decode down).")
def sim_command(layout: str, device: str, graph_mode: str, salad_foreign_share: float,
                cross_talk_foreign_share: float, fatal_foreign_share: float,
                prefix_caching: bool, indexer: str, host: str,
                port: int, max_num_seqs: int, max_model_len: int, receipts_dir: str | None,
                step_delay: float) -> None:
    """Serve the embedded reference server (OpenAI-compatible, vLLM-shaped).

    \b
    Examples:
      dsv4-qual sim --layout packed --port 8000      # the bug, on any machine
      dsv4-qual sim --layout capacity --device cuda  # the fix, under a real CUDA graph
      dsv4-qual sim --layout prefix --graph-mode full  # 0.29+'s layout, mixed steps captured
      dsv4-qual sim --prefix-caching --indexer captured  # vLLM #52492's face
    """
    try:
        import torch

        from server_patch.sim.config import SimConfig
        from server_patch.sim.server import bind, serve
    except ImportError as exc:  # the load generator alone was installed
        raise SimInputError("the sim needs the server extra (from the checkout: pip install "
                            "-e '.[server]'; on a CPU machine install torch's CPU wheel "
                            f"first, as the README's Install says): {exc}") from None

    if device == "cuda" and not torch.cuda.is_available():
        raise SimInputError("--device cuda: no CUDA device is available")
    cfg = SimConfig(layout=layout, device=device, max_num_seqs=max_num_seqs,
                    max_model_len=max_model_len, receipts_dir=receipts_dir,
                    step_delay_s=step_delay, graph_mode=graph_mode,
                    salad_foreign_share=salad_foreign_share,
                    cross_talk_foreign_share=cross_talk_foreign_share,
                    fatal_foreign_share=fatal_foreign_share,
                    prefix_caching=prefix_caching, indexer=indexer)
    try:
        sock = bind(host, port)  # first: a port in use is bad input, said in one line
    except OSError as exc:
        raise SimInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    # Only now, with the port ours, is there something to announce.
    click.echo(f"dsv4-qual sim: serving layout {layout} ({graph_mode} graphs) on {device} at "
               f"http://{host}:{port} "
               f"(max_num_seqs {max_num_seqs}, max_model_len {max_model_len}, "
               f"C128A capacity {cfg.capacity}, prefix caching "
               f"{'on' if prefix_caching else 'off'}, indexer {indexer})", err=True)
    serve(cfg, sock)

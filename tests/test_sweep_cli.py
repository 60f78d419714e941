"""sweep on the fewest chips per point, reasons for dropped points, the context window, progress."""

import pandas as pd
import pytest

import membound as mb
from _cli import run_cli as run


def test_auto_chips_puts_each_point_on_the_fewest_that_hold_it():
    t = mb.sweep("llama-3.1-70b", "h100-sxm", batch=[1, 64], prompt_tokens=[512, 8192], output_tokens=256,
                 n_chips="auto")
    chips = {(b, s): n for b, s, n in zip(t.batch, t.prompt_tokens, t.n_chips)}
    # bf16 weights 141.1 GB; KV 327,680 B per token (80 layers x 8 heads x 128 x 2 x 2 B); H100 85.5 GB:
    # batch 1 (a few GB of KV at most): 141.1 / 2 = 70.6 GB per chip -> 2 chips
    # batch 64 at 512 + 256: KV 64 x 768 x 327,680 = 16.1 GB -> (141.1 + 16.1) / 2 = 78.6 GB -> 2 chips
    # batch 64 at 8192 + 256: KV 64 x 8448 x 327,680 = 177.2 GB -> 318 GB: 3 chips hold 106 GB each,
    #   too much, and 64 heads do not split 3 ways anyway; 4 chips hold 79.6 GB each -> 4
    assert chips == {(1, 512): 2, (1, 8192): 2, (64, 512): 2, (64, 8192): 4}
    assert set(t.reason) == {""} and t.memory_fits.all()
    # each row is estimate() at that count and layout
    r = mb.estimate("llama-3.1-70b", "h100-sxm", batch=64, prompt_tokens=8192, n_chips=4,
                    parallel=mb.layout_for("llama-3.1-70b", "h100-sxm", 4))
    row = t[(t.batch == 64) & (t.prompt_tokens == 8192)].iloc[0]
    assert row.decode_tok_s_per_user == pytest.approx(r.decode_tok_s_per_user, rel=1e-12)


def test_auto_chips_on_a_tiered_chip_stream_at_speed_as_estimate_counts():
    """On the SN40L (SRAM 0.52 GB + HBM 64 GB a socket stream at speed, DDR behind them at
    100 GB/s) one socket holds Llama-3.1-70B's 2 x 70.55e9 = 141.1 GB of bf16 weights only by
    putting 141.1 - 64.52 = 76.6 GB in DDR; sweep(n_chips="auto") counts as estimate and compare
    do: the fewest sockets with nothing in DDR. tp=4 holds 141.1 / 4 = 35.3 GB of weights a socket,
    within 64.52 GB; 3 sockets lay out as tp=2 (the largest divisor of the 64 heads <= 3, the third
    idles: layout_for), 141.1 / 2 = 70.5 GB a socket, over it."""
    t = mb.sweep("llama-3.1-70b", "sambanova-sn40l", n_chips="auto")
    assert t["n_chips"].tolist() == [4] == [mb.estimate("llama-3.1-70b", "sambanova-sn40l").n_chips]
    assert mb.min_chips("llama-3.1-70b", "sambanova-sn40l") == 1        # it fits on one, spilling
    assert mb.layout_for("llama-3.1-70b", "sambanova-sn40l", 3).tp == 2
    assert t["memory_weights_bytes"][0] == pytest.approx(2 * 70.553706496e9 / 4, rel=1e-9)
    held = t["memory_weights_bytes"][0] + t["memory_kv_bytes"][0] + t["memory_activation_bytes"][0]
    assert held <= 0.52e9 + 64e9


def test_cli_sweep_defaults_to_auto_and_drops_nothing_silently(tmp_path):
    out = tmp_path / "g.csv"
    p = run("sweep", "--models", "llama-3.1-8b,llama-3.1-70b", "--hardware", "h100-sxm,h200", "--batch", "1,8,64",
            "--prompt", "512,8192", "-o", str(out))
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(out, keep_default_na=False)
    assert len(df) == 2 * 2 * 3 * 2 and set(df.reason) == {""}     # every point of the README's grid


def test_cli_sweep_fixed_chips_gives_a_reason_and_blank_figures(tmp_path):
    out = tmp_path / "g.csv"
    p = run("sweep", "--models", "llama-3.1-70b", "--hardware", "h100-sxm", "--chips", "1", "--batch", "1,2",
            "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(out)
    # 141.1 GB of bf16 weights on one 85.5 GB H100: neither batch fits
    assert len(df) == 2 and not df.memory_fits.any()
    assert all(r.startswith("does not fit: ") and r.endswith("GB on 1 chips") for r in df.reason)
    assert df.decode_tok_s_per_user.isna().all()
    import json
    assert json.loads(p.stdout)["dropped"] == 2


def test_sweep_refuses_a_grid_past_the_context_window():
    # llama-2-7b holds 4,096 tokens; 8,000 + 256 is past it
    with pytest.raises(mb.InvalidInputError, match="context window"):
        mb.sweep("llama-2-7b", "h100-sxm", prompt_tokens=[512, 8000])
    t = mb.sweep(["llama-2-7b", "llama-3.1-8b"], "h100-sxm", prompt_tokens=[512, 8000], on_invalid="skip")
    assert set(t.model) == {"llama-3.1-8b"} and t.attrs["skipped"][0][0] == "llama-2-7b"
    t = mb.sweep("llama-2-7b", "h100-sxm", prompt_tokens=[512, 8000], allow_beyond_context=True)
    assert sorted(t.prompt_tokens) == [512, 8000]


def test_progress_counts_every_point_and_hides_off_a_terminal(tmp_path):
    args = ("sweep", "--models", "llama-3.1-8b", "--hardware", "h100-sxm,h200,l4", "--batch", "1,8,64",
            "--prompt", "512,1024", "-o", str(tmp_path / "g.csv"))
    quiet = run(*args)
    assert quiet.returncode == 0 and quiet.stderr == ""          # stderr is a pipe: no bar
    shown = run(*args, "--progress")
    assert shown.returncode == 0
    # 3 devices x 3 batches x 2 prompts = 18 points, reached only at the end
    assert "18/18" in shown.stderr and "100%" in shown.stderr
    assert shown.stderr.count("18/18") <= 2           # the final repaint (and tqdm's close), no more

"""mb.explore(), headless: drive the widgets' values and check the table, the plot and the errors."""
import pytest

import membound as mb

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")


def test_explorer_follows_its_controls():
    e = mb.explore("llama-3.1-70b", "h100-sxm", prompt_tokens=2048, output_tokens=256)
    # 141.1 GB of bf16 weights: 2 H100s (85.5 GB each) at batch 1
    assert e.result.n_chips == 2 and e.error.value == ""
    assert "decode per user" in e.table.value and e.plot.value[:4] == b"\x89PNG"
    e.weights.value = "fp8"            # 70.55 GB of fp8 weights fit one H100
    assert e.result.weight_dtype == "fp8" and e.result.n_chips == 1
    before = e.result.decode_tok_s_total
    e.batch.value = 8
    assert e.result.batch == 8 and e.result.decode_tok_s_total > before
    e.hardware.value = "h200"
    assert e.result.hardware == "h200" and "h200" in e.table.value
    e.chips.value = 2
    assert e.result.n_chips == 2
    e.output.value = 100
    assert e.result.output_tokens == 100


def test_explorer_shows_errors_in_place_of_the_table():
    e = mb.explore("llama-2-7b", "h100-sxm", prompt_tokens=1024)
    e.prompt.value = 8000              # llama-2-7b's window is 4,096 tokens
    assert e.result is None and e.table.value == ""
    assert "context window of 4,096 tokens" in e.error.value
    e.prompt.value = 1024
    assert e.error.value == "" and e.result.prompt_tokens == 1024
    e.model.value = "llama-3.1-405b"   # 810 GB of bf16 weights on the chip count asked
    e.chips.value = 1
    assert e.result is None and "does not fit" in e.error.value


def test_explorer_refuses_unknown_names_up_front():
    with pytest.raises(mb.UnknownNameError):
        mb.explore("no-such-model", "h100-sxm")


def test_explorer_concurrency_mode_serves_clients():
    e = mb.explore("llama-3.1-8b", "h100-sxm", prompt_tokens=1024, output_tokens=256)
    assert e.served is None
    e.mode.value = "concurrency"
    assert e.served is not None and e.served.concurrency == 1 and e.served.n_chips == 1
    one = e.served.tok_s_per_user
    e.batch.value = 64                # 64 clients share the steps: each gets fewer tokens per second
    assert e.served.concurrency == 64 and e.served.tok_s_per_user < one
    assert e.served.output_tok_s > one                      # but together they get more
    assert e.plot.value[:4] == b"\x89PNG" and e.error.value == ""
    e.mode.value = "batch"
    assert e.served is None and e.result.batch == 64

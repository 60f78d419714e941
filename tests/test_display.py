"""Reprs and tables of results, models and devices, with units a reader can check."""
import pandas as pd

import membound as mb


def test_hardware_repr_and_tables_show_units():
    h = mb.load_hardware("h100-sxm")
    # H100 SXM: 3.35e12 B/s = 3.35 TB/s; bf16 dense 989e12 FLOP/s = 989 TFLOP/s
    assert "3.35 TB/s" in repr(h) and "989 TFLOP/s" in repr(h)
    text = str(h)
    assert "3.35 TB/s" in text and "bf16 989 TFLOP/s" in text and "450 GB/s per direction" in text
    html = h._repr_html_()
    assert html.startswith("<table>") and "3.35 TB/s" in html


def test_tiered_device_lists_every_tier_without_exponents():
    text = str(mb.load_hardware("sambanova-sn40l"))
    assert text.count("memory ") == 2 and "e+" not in text   # HBM and DDR


def test_model_tables_show_params_in_billions_and_kv_bytes():
    m = mb.load_model("llama-3.1-8b")
    # KV per token: 2 (K and V) * 32 layers * 8 KV heads * 128 head dim * 2 bytes = 131,072 B = 131 kB
    kv = 2 * 32 * 8 * 128 * 2
    assert kv == 131072
    text = str(m)
    assert "131 kB per token" in text
    assert f"{m.total_params / 1e9:.2f} B total" in text
    assert "GQA: 32 query heads, 8 KV heads" in text
    assert "<table>" in m._repr_html_() and "llama-3.1-8b" in repr(m)


def test_result_to_dict_and_dataframe_row():
    r = mb.estimate("llama-3.1-8b", "h100-sxm", batch=2, prompt_tokens=100, output_tokens=10)
    d = r.to_dict()
    assert d["batch"] == 2 and d["model"] == "llama-3.1-8b"
    assert d["decode_tok_s_total"] == r.decode_tok_s_per_user * 2
    assert d["memory_weights_bytes"] == r.memory.weights_bytes and "memory_s" in d
    row = r.to_pandas()
    assert isinstance(row, pd.DataFrame) and len(row) == 1
    assert row.loc[0, "decode_tok_s_per_user"] == r.decode_tok_s_per_user
    assert "tok/s" in str(r) and "<table>" in r._repr_html_()

"""Pipeline and expert parallelism, by hand."""
import numpy as np
import pytest

import membound as mb


def test_pipeline_adds_capacity_not_per_user_speed():
    hw = mb.load_hardware("h100-sxm")
    m = mb.load_model("llama-3.1-8b")
    bw, link = hw.bandwidth_bytes_s, hw.interconnect
    one = mb.estimate(m, hw, prompt_tokens=0, output_tokens=1, runtime="ideal")
    r = mb.estimate(m, hw, n_chips=2, parallel=mb.Parallel(pp=2), prompt_tokens=0, output_tokens=1, runtime="ideal")
    hop = link.latency_s + 4096 * 2 / link.bandwidth_bytes_s      # one boundary: a bf16 hidden state
    streamed = 2 * (m.total_params - 128256 * 4096 + 4096)     # the input embedding is a lookup
    assert r.tpot_s == pytest.approx(streamed / bw + hop, rel=1e-9)
    assert r.tpot_s > one.tpot_s
    assert r.memory.weights_bytes == pytest.approx(one.memory.weights_bytes / 2)
    # batch 2 over 2 stages runs as 2 micro-batches of 1: same step, twice the aggregate
    r2 = mb.estimate(m, hw, n_chips=2, parallel=mb.Parallel(pp=2), batch=2, prompt_tokens=0, output_tokens=1, runtime="ideal")
    assert r2.tpot_s == pytest.approx(r.tpot_s, rel=1e-9)
    assert r2.decode_tok_s_total == pytest.approx(2 / r.tpot_s, rel=1e-9)


def test_expert_parallel_splits_experts_and_adds_all_to_all():
    hw = mb.load_hardware("h100-sxm")
    m = mb.load_model("mixtral-8x7b")
    link = hw.interconnect
    r = mb.estimate(m, hw, n_chips=2, parallel=mb.Parallel(ep=2), prompt_tokens=0, output_tokens=1, runtime="ideal")
    # batch 1 touches k=2 experts per layer, spread over 2 chips: 1 expert's bytes per chip per layer
    w_chip = (m.dense_params - 32000 * 4096 + 4096 + m.n_moe_layers * 2 * m.expert_params / 2) * 2
    # 2 all-to-alls per MoE layer: (ep-1)/ep x (tokens/ep) x k x hidden x 2 bytes, plus one hop
    a2a = 0.5 * 0.5 * 2 * 4096 * 2 / link.bandwidth_bytes_s + link.latency_s
    comm = m.n_moe_layers * 2 * a2a
    assert r.tpot_s == pytest.approx(w_chip / hw.bandwidth_bytes_s + comm, rel=1e-9)


def test_the_layout_rule_by_hand():
    m = mb.load_model("llama-3.1-70b")          # 64 heads, 80 layers
    rule = mb.layout_for
    # GPUs: tensor parallel inside the NVLink domain of 8, then pipeline stages
    assert rule(m, "h100-sxm", 8) == mb.Parallel(tp=8)
    assert rule(m, "h100-sxm", 16) == mb.Parallel(tp=8, pp=2)
    # 3 GPUs: the largest divisor of 64 heads <= 3 is 2; 3 // 2 = 1 stage; one chip idles
    assert rule(m, "h100-sxm", 3) == mb.Parallel(tp=2)
    # 17 GPUs: tp 8, 17 // 8 = 2 stages of 40 layers, one chip idle
    assert rule(m, "h100-sxm", 17) == mb.Parallel(tp=8, pp=2)
    # wafers never split a layer over the wafer I/O: 4 wafers = 4 stages of 20 layers
    assert rule(m, "cerebras-wse-3", 4) == mb.Parallel(pp=4)
    # 81 wafers: at most one stage per layer, one wafer idle
    assert rule(m, "cerebras-wse-3", 81) == mb.Parallel(pp=80)
    # Groq (layout "pipeline", ISCA 2022: inference as a pipeline of whole layers): stages first,
    # over 84 units: 80 layers, the LM head in 2 parts and the untied embedding in 2 (each part at
    # most a layer: 128,256 x 8,192 = 1,050,673,152 params over a 855.7M-param layer, 1.23 -> 2).
    # 40 chips: 40 stages (the largest of ceil(84/40) = 3 units), no tp
    assert rule(m, "groq-lpu", 40) == mb.Parallel(pp=40)
    assert mb.Parallel(pp=40).stage_layers(80) == 2
    # 100 chips: 100 // 84 = 1 chip a unit: 84 stages, 16 chips idle
    assert rule(m, "groq-lpu", 100) == mb.Parallel(pp=84)
    # 320 chips: 320 // 84 = 3, the largest divisor of 64 heads <= 3 is 2: tp 2 x 84 stages
    assert rule(m, "groq-lpu", 320) == mb.Parallel(tp=2, pp=84)
    # 336 = 4 x 84: tp 4; 568 chips (the count a Groq engineer gave for Llama-2 70B): 568 // 84 = 6
    # -> 4: the same tp 4 x 84 stages, 232 chips idle
    assert rule(m, "groq-lpu", 336) == mb.Parallel(tp=4, pp=84)
    assert rule(m, "groq-lpu", 568) == mb.Parallel(tp=4, pp=84)
    # 1,000 // 84 = 11 -> 8; 2,000 // 84 = 23 -> 16 (a layer across nodes)
    assert rule(m, "groq-lpu", 1000) == mb.Parallel(tp=8, pp=84)
    assert rule(m, "groq-lpu", 2000) == mb.Parallel(tp=16, pp=84)
    assert mb.Parallel(tp=8, pp=41).stage_layers(80) == 2     # 41 stages: 39 of 2 layers, 2 of 1


def test_a_groq_layer_sits_on_the_fewest_chips_that_hold_it_by_hand():
    """Llama-2-70B in int8: a layer's weights are q and o (8192^2 each = 67,108,864), k and v (8192 x
    8 KV heads x 128 = 8,388,608 each), gate, up and down (3 x 8192 x 28672 = 704,643,072) and two
    norms (16,384): 855,654,400 bytes at one a weight, more than 3 chips of 220 MiB (692 MB), less
    than 4 (923 MB). Its LM head and untied embedding, 32,000 x 8,192 = 262,144,000 params each, are
    one pipeline unit each (less than a layer: `head_parts`), so the pipeline has 82 units. Stages
    first (layout "pipeline"): 82 chips hold a unit each, 164 two chips a unit (tp 2), 328 four (tp
    4); 246 chips still lay out as tp 2 (3 does not divide 64 heads), so the fewest chips are 328."""
    m = mb.load_model("llama-2-70b")
    h, f, kv = 8192, 28672, 8 * 128
    layer = h * h + 2 * h * kv + h * h + 3 * h * f + 2 * h     # q, k and v, o, gate/up/down, two norms
    assert layer == 67_108_864 * 2 + 8_388_608 * 2 + 704_643_072 + 16_384 == 855_654_400
    assert 3 * 220 * 2**20 < layer < 4 * 220 * 2**20            # 1 byte a weight: 4 chips, not 3
    assert mb.layout_for(m, "groq-lpu", 246) == mb.Parallel(tp=2, pp=82)
    assert mb.min_chips(m, "groq-lpu", weight_dtype="int8", context_tokens=4096) == 328
    r = mb.estimate(m, "groq-lpu", n_chips=328, weight_dtype="int8", prompt_tokens=4095, output_tokens=1)
    assert r.parallel == "tp=4 pp=82 ep=1" and r.memory.fits
    # the fullest chip holds one unit, a decoder layer (the largest unit), split 4 ways
    assert r.memory.weights_bytes == pytest.approx(855_654_400 / 4, rel=1e-6)


def test_groq_lm_head_and_embedding_parts_by_hand():
    """The LM head and an untied embedding on a pipeline of whole layers (`head_parts`): each split
    into the fewest parts of at most one decoder layer's parameters, each part a stage of tp chips.
    Llama 3.1 8B: head = 128,256 x 4,096 = 525,336,576 params; a layer = (8,030,261,248 - 2 x
    525,336,576) / 32 = 218,112,128; 525,336,576 / 218,112,128 = 2.41 -> 3 parts, and 3 for the
    embedding: 32 + 3 + 3 = 38 units. One layer in int8 (218 MB) with its KV fits one chip of 220 MiB
    (230.7 MB), so the fewest chips are 38, tp 1. The fullest chip holds one decoder layer: 218.1 MB,
    not the 8,030 MB / 38 = 211.3 MB a pro rata share would give; a chip of the head holds
    525.3 MB / 3 = 175.1 MB. Per token the pipeline hops 37 times, not 31."""
    from membound.physics.parallel import head_parts
    m = mb.load_model("llama-3.1-8b")
    head = 128_256 * 4_096
    assert head == 525_336_576 and m.total_params == 8_030_261_248
    layer = (8_030_261_248 - 2 * head) / 32
    assert layer == 218_112_128
    assert head_parts(m.total_params, head, head, 32) == (3, 3)
    assert mb.layout_for(m, "groq-lpu", 38) == mb.Parallel(pp=38)
    assert mb.min_chips(m, "groq-lpu", weight_dtype="int8", context_tokens=1280) == 38
    r = mb.estimate(m, "groq-lpu", weight_dtype="int8", prompt_tokens=1024, output_tokens=256, runtime="ideal")
    assert r.n_chips == 38 and r.parallel == "tp=1 pp=38 ep=1"
    assert r.memory.weights_bytes == pytest.approx(218_112_128, rel=1e-9)
    # Llama 2 7B (32,000 x 4,096 = 131,072,000 < a layer's 202,383,488): one part each, 34 units
    assert head_parts(6_738_415_616, 131_072_000, 131_072_000, 32) == (1, 1)
    assert mb.layout_for("llama-2-7b", "groq-lpu", 34) == mb.Parallel(pp=34)
    # a tied head (no embedding table of its own) has no embedding parts; a GPU's layout is unchanged
    assert head_parts(1e9, 1e8, 0.0, 10) == (2, 0)
    assert mb.layout_for(m, "h100-sxm", 16) == mb.Parallel(tp=8, pp=2)
    with pytest.raises(mb.InvalidInputError, match="pipeline units"):
        mb.estimate(m, "groq-lpu", parallel=mb.Parallel(pp=39), n_chips=39)


def test_groq_lm_head_parts_run_at_once_by_hand():
    """The LM head's parts are the columns of one product split over chips (ISCA 2022 sec. 5.2): they
    compute at once (`head_path`). Llama 3.1 8B int8 on 38 chips (h = e = 3, U = 38 units, k = 1 a
    stage): a token streams 1/3 of the head, 525,336,576 x 2 B (the MXM's fp16 intake) / 9.216e12 / 3 =
    38.0 us where the parts one after another took 114.0; its pass crosses 38 - 3 - 3 + 1 + 1 = 34
    levels, and the parts' largest logits are gathered to one chip, one more: 35, so 34 hops, not 37. On 19 stages
    (k = 2) a stage runs two parts in series: 2/3 of the head, the head over ceil(3/2) = 2 stages and
    the embedding over 2: 19 - 4 + 2 + 1 = 18 levels, 17 hops. One part each (Llama 2): 34 stages,
    34 - 2 + 2 = 34 levels, no gather, 33 hops, as before."""
    from membound.physics.parallel import head_path
    assert head_path(32.0, 3, 3, 38.0) == (pytest.approx(1 / 3), 35.0)
    assert head_path(32.0, 3, 3, 19.0) == (pytest.approx(2 / 3), 18.0)
    assert head_path(32.0, 1, 1, 34.0) == (1.0, 34.0)
    assert head_path(10.0, 2, 0, 12.0) == (0.5, 12.0 - 2 + 1 + 1)     # tied: no embedding level
    call = dict(n_chips=38, weight_dtype="int8", prompt_tokens=0, output_tokens=1, runtime="ideal")
    r = mb.estimate("llama-3.1-8b", "groq-lpu", **call)
    hw = mb.load_hardware("groq-lpu")
    third = 525_336_576 * 2 / (10240 * 0.9e9) / 3
    assert third == pytest.approx(38.0e-6, rel=1e-3)
    bw, act = hw.interconnect.bandwidth_bytes_s, 4096 * 1     # one int8 hidden state a boundary
    assert r.step_terms_s["communication"] == pytest.approx(34 * (722e-9 + act / bw), rel=1e-9)
    d = mb.estimate("llama-3.1-8b", "groq-lpu", **{**call, "runtime": "device"})
    layers = (8_030_261_248 - 2 * 525_336_576 + 4096) * 2 / (10240 * 0.9e9)    # the layers and one embedding row
    assert d.step_terms_s["memory"] == pytest.approx(layers + third, rel=1e-9)


def test_uneven_stages_by_hand():
    """3 stages over 80 layers: the largest holds ceil(80/3) = 27 layers, so each chip holds
    27/80 of the weights; at batch 3 the three micro-batches beat at that stage: a step is
    max(1, 3 x 27/80) = 1.0125 passes."""
    hw = mb.load_hardware("cerebras-wse-3")
    m = mb.load_model("llama-3.1-70b")
    r = mb.estimate(m, hw, n_chips=3, output_tokens=1, runtime="ideal", check_memory=False)
    assert r.parallel == "tp=1 pp=3 ep=1"
    assert r.memory.weights_bytes == pytest.approx(m.total_params * 2 * 27 / 80, rel=1e-12)
    r3 = mb.estimate(m, hw, n_chips=3, batch=3, output_tokens=1, runtime="ideal", check_memory=False)
    one = mb.estimate(m, hw, n_chips=3, batch=1, output_tokens=1, runtime="ideal", check_memory=False)
    assert r3.step_terms_s["memory"] == pytest.approx(one.step_terms_s["memory"] * 3 * 27 / 80, rel=1e-9)


def test_bad_layouts():
    m = mb.load_model("mixtral-8x7b")
    for bad in (dict(tp=0), dict(pp=-1), dict(ep=1.5)):
        with pytest.raises(mb.InvalidInputError):
            mb.Parallel(**bad)
    with pytest.raises(mb.InvalidInputError, match="parallel.ep"):
        mb.Parallel(ep=9).check(m, 9)              # more ranks than its 8 experts
    with pytest.raises(mb.InvalidInputError, match="parallel.ep"):
        mb.Parallel(ep=2).check(mb.load_model("llama-3.1-8b"), 2)     # a dense model has no experts
    assert mb.Parallel(ep=3).check(m, 3).ep == 3    # 8 experts on 3 ranks: 3, 3 and 2
    with pytest.raises(mb.InvalidInputError, match="parallel.pp"):
        mb.Parallel(pp=64).check(m, 64)
    with pytest.raises(mb.InvalidInputError, match="interconnect|tp"):
        mb.estimate("llama-3.1-8b", "apple-m2-ultra", n_chips=2)


def test_expert_parallel_that_does_not_divide_the_experts_by_hand():
    """Wide EP as the GB200 NVL72 disaggregated recipes run it: 48 ranks on DeepSeek-R1's 256 routed
    experts. Each rank holds ceil(256/48) = 6 experts of each of the 58 MoE layers (the fullest
    rank; 48 x 6 = 288 slots >= 256), plus all the non-expert weights (attention runs data-parallel).
    One expert is gate+up+down = 3 x 7168 x 2048 = 44,040,192 weights; fp8 is 1 byte each."""
    m = mb.load_model("deepseek-r1")
    expert = 3 * 7168 * 2048
    assert expert == 44_040_192
    non_expert = m.total_params - 58 * 256 * expert

    def weights(ep):
        return mb.estimate(m, "gb200", n_chips=ep, parallel=mb.Parallel(ep=ep), weight_dtype="fp8",
                           runtime="ideal", check_memory=False).memory.weights_bytes

    assert weights(48) == pytest.approx(non_expert + 58 * 6 * expert, rel=1e-12)
    assert weights(24) == pytest.approx(non_expert + 58 * 11 * expert, rel=1e-12)   # ceil(256/24) = 11
    # where ep divides 256 the rule is the even split: 32 ranks hold 8 experts each
    assert weights(32) == pytest.approx(non_expert + 58 * 8 * expert, rel=1e-12)


def test_collectives_by_hand():
    # tp 2, pp 2, ep 2 over a ring; 10 tokens x 1,000 hidden x 2 bytes = 20,000 bytes a hop moves;
    # 4 layers, 2 of them MoE with k = 2; links of 1e11 B/s and 1 us a hop:
    #   tp: 4 x 2 all-reduces x (2(2-1)/2 x 20,000 / 1e11 + 2 hops x 1e-6) = 8 x 2.2e-6 = 1.76e-5
    #   pp: (2-1) x (1e-6 + 20,000 / 1e11)                                   = 1.2e-6
    #   ep: 2 x 2 all-to-alls x ((2-1)/2 x 20,000/2 x 2 / 1e11 + 1e-6)       = 4 x 1.1e-6 = 4.4e-6
    from membound.physics.parallel import collective_s, collectives, communication_s
    c = collectives(2.0, 2.0, 2.0, 1000.0, 4.0, 2.0, 2.0, 2.0, 1e11, 1e-6)
    assert collective_s(c, 10.0) == pytest.approx(1.76e-5 + 1.2e-6 + 4.4e-6, rel=1e-12)
    assert communication_s(2.0, 2.0, 2.0, 10.0, 1000.0, 4.0, 2.0, 2.0, 2.0, 1e11, 1e-6) == collective_s(c, 10.0)
    # no stages, one expert-parallel rank: those terms are exactly 0 and left out
    flat = collectives(2.0, 1.0, 1.0, 1000.0, 4.0, 2.0, 2.0, 2.0, 1e11, 1e-6)
    assert flat.pp_hops is None and flat.moe_layers is None
    assert collective_s(flat, 10.0) == pytest.approx(1.76e-5, rel=1e-12)
    assert collective_s(flat, np.array([10.0, 20.0])) == pytest.approx([1.76e-5, 4 * 2 * (4e-7 + 2e-6)], rel=1e-12)


def test_tp_allreduce_at_an_mlperf_decode_step():
    # issue 29 (helper mlperf20; data/reference/mlperf/README.md "The decode GEMMs' weight read and the all-reduce"):
    # B200 Llama-3.1-405B Interactive runs tensor 4 (NVIDIA v5.1 configs); a decode step of 23 sequences moves
    # 23 tokens x 16,384 hidden x 2 bytes (bf16 residual) = 753,664 bytes an all-reduce. The b200 profile's NVLink 5:
    # 9e11 B/s each way, 3 us a hop, switched (2 hops an all-reduce whatever tp):
    #   one all-reduce: 2(4-1)/4 x 753,664 / 9e11 + 2 x 3e-6 = 1.256107e-6 + 6e-6 = 7.256107e-6 s
    #   a step: 126 layers x 2 all-reduces x 7.256107e-6                       = 1.828539e-3 s
    # TensorRT-LLM's custom all-reduce measured on 4 B200s (aiconfigurator @095f58a b200_sxm/comm/trtllm/1.3.0rc10
    # custom_allreduce_perf: 7.10 us at 262,144 and 9.71 us at 524,288 elements; 376,832 here) brackets it within
    # ~1-2 us, so the engine's extra all-reduce latency (per_allreduce_s) stays 0 for tensorrt-llm.
    from membound.catalog.hardware import load_hardware
    from membound.catalog.runtime import load_runtime
    from membound.physics.parallel import communication_s
    link = load_hardware("b200").interconnect
    assert (link.bandwidth_bytes_s, link.latency_s, link.topology) == (9.0e11, 3.0e-6, "switch")
    one = 2 * 3 / 4 * 753_664 / 9e11 + 2 * 3e-6
    assert one == pytest.approx(7.256107e-6, rel=1e-6)
    step = communication_s(4.0, 1.0, 1.0, 23.0, 16384.0, 126.0, 0.0, 1.0, 2.0, link.bandwidth_bytes_s,
                           link.latency_s, ring=False)
    assert step == pytest.approx(126 * 2 * 7.256107e-6, rel=1e-6)
    assert step == pytest.approx(1.828539e-3, rel=1e-6)
    # the measured bracket: above the smaller message's 7.10 us less 1 us, below the larger message's 9.71 us
    assert 7.10e-6 - 1e-6 < one < 9.71e-6
    assert load_runtime("tensorrt-llm").served.per_allreduce_s == 0.0

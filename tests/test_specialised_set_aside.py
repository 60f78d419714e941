"""A specialised chip's row is set aside as 'faster than physics' only on what its source states
(issue 28, honest reporting): not on an assumed chip count, nor on an assumed weight format."""
from dataclasses import replace

from membound.fidelity.calibrate import beats_physics
from membound.fidelity.reference import load_reference


def test_a_row_beating_the_roofline_of_an_assumed_weight_format_is_reported_not_set_aside():
    """hw-022 (SambaNova, DeepSeek-R1, 'a single rack of 16 SN40L RDUs ... 198 tokens/s') states its
    16 chips but not its weight format; membound assumes bf16, whose pure roofline on 16 sockets
    (peak HBM and DDR, no floor) is below 198 tok/s. In fp8 the same roofline would be above it, so
    the row is reported with its error (membound.vendors prints the tokens a pass it would need),
    not set aside. Stated, the same format would set it aside."""
    sc = load_reference(only={"hw-022"}).scenarios[0]
    assert sc.chips_stated and sc.n_chips == 16 and sc.weight_dtype == "bf16" and not sc.weights_stated
    assert beats_physics(sc) is None
    assert beats_physics(replace(sc, weights_stated=True)).startswith("faster than the pure roofline: measured 198")

"""A capacity-planning recipe: 200 chat users, each at 40 tok/s or more, 2,048-token prompts and
500-token answers, for Llama 3.1 70B: which of H100, H200, MI300X and B200 is cheapest, and how
many GPUs does it take? (docs/capacity-planning.md; tests/test_capacity_recipe.py runs it.)

Run: python examples/capacity_recipe.py
"""
import membound as mb
from membound.planning.planner import PlanResult

DEVICES = ["h100-sxm", "h200", "mi300x", "b200"]


def recipe() -> PlanResult:
    """Every fleet that carries the workload within the target, cheapest first (prices: the profiles')."""
    workload = mb.Workload(concurrent_users=200, prompt_tokens=2048, output_tokens=500)
    target = mb.SLO(min_tok_s_per_user=40)
    return mb.plan("llama-3.1-70b", workload, target, hardware=DEVICES)


def cheapest_per_device(result: PlanResult):
    """The cheapest fleet of each device (rows of `result.ranked`, cheapest first)."""
    return result.ranked.drop_duplicates("hardware")


def table(result: PlanResult) -> str:
    """The cheapest fleet of each device as a Markdown table."""
    head = ("| device | fleet | weights | users per replica | tok/s per user | GPUs | $ per million output tokens |\n"
            "| --- | --- | --- | --- | --- | --- | --- |")
    rows = [f"| {r.hardware} | {r.replicas} x {r.n_chips} GPUs ({r.parallel}) | {r.weight_dtype} | {r.batch} | "
            f"{r.tok_s_per_user:.1f} | {r.total_chips} | {r.cost_per_million_tokens_usd:.2f} |"
            for r in cheapest_per_device(result).itertuples()]
    return "\n".join([head, *rows])


if __name__ == "__main__":
    res = recipe()
    print(res.explanation)
    print()
    print(table(res))

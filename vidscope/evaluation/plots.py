"""The PNG plots of an evaluation report: aggregates only, at fixed sizes.

A run may hold two questions or two thousand; every plot summarises them (accuracy per category
with its 95 % Wilson interval and the chance level, a latency histogram with p50/p95, the
distributions of steps, tokens and cost per question) and none draws one mark per question, so a
plot's size depends at most on the number of categories, and that is capped
(:data:`MAX_CATEGORIES`, the largest categories are kept and the title says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidscope.evaluation.stats import percentile

if TYPE_CHECKING:
    from vidscope.evaluation.report import RunSummary
    from vidscope.evaluation.runs import Prediction

ACCURACY_PLOT = "accuracy_by_category.png"
LATENCY_PLOT = "latency.png"
USAGE_PLOT = "tokens_cost.png"
#: The plots a report draws, by file name, in the order the report shows them.
PLOT_FILES = (ACCURACY_PLOT, LATENCY_PLOT, USAGE_PLOT)
#: At most this many categories are drawn (the largest); the table lists them all.
MAX_CATEGORIES = 30
#: Dots per inch of every plot (the sizes below are in inches).
DPI = 100
#: Category labels longer than this are cut (the table has them whole).
LABEL_CHARS = 32
_BAR = "#4c72b0"
_CHANCE = "#c44e52"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    return plt


def _label(text: str) -> str:
    text = " ".join(text.split())
    # Matplotlib reads $...$ as math: a category is data, shown as written.
    text = text.replace("$", r"\$")
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _nothing(ax: Any, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_accuracy(path: Path, summary: RunSummary) -> Path:
    """Accuracy per category (horizontal bars, 95 % interval, chance level, overall line); for a
    run without categories, its scores."""
    plt = _pyplot()
    groups = summary.by_category
    shown = sorted(groups, key=lambda k: -groups[k].total)[:MAX_CATEGORIES]
    shown.sort()
    rows = len(shown) if groups else len(summary.scores)
    height = min(10.0, max(3.0, 1.3 + 0.3 * rows))
    fig, ax = plt.subplots(figsize=(8.0, height))
    title = f"{summary.benchmark} · {summary.agent}"
    if summary.ablations:
        title += " · " + ", ".join(summary.ablations)
    if groups:
        picked = [groups[k] for k in shown]
        values = [100 * g.accuracy for g in picked]
        low = [100 * (g.accuracy - (g.accuracy if g.low is None else g.low)) for g in picked]
        high = [100 * ((g.accuracy if g.high is None else g.high) - g.accuracy) for g in picked]
        y = list(range(len(shown)))[::-1]
        ax.barh(y, values, color=_BAR, xerr=[low, high], ecolor="#333333", capsize=3, height=0.7)
        chance = [(yy, 100 * g.chance) for yy, g in zip(y, picked, strict=True) if g.chance is not None]
        if chance:
            ax.scatter(
                [c for _, c in chance],
                [yy for yy, _ in chance],
                marker="|",
                s=300,
                linewidths=2.5,
                color=_CHANCE,
                zorder=3,
                label="chance",
            )
        ax.set_yticks(y, [f"{_label(k)} (n={groups[k].total})" for k in shown])
        overall = summary.scores.get("accuracy")
        if overall is not None:
            ax.axvline(100 * overall, color="#333333", linestyle="--", linewidth=1, label="overall")
        ax.set_xlim(0, 100)
        ax.set_xlabel("accuracy % (bars: 95 % Wilson interval)")
        # Above the plot, right of the title: never over a bar.
        ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8, frameon=False)
        if len(groups) > len(shown):
            title += f" · largest {len(shown)} of {len(groups)} categories"
    elif summary.scores:
        names = list(summary.scores)
        y = list(range(len(names)))[::-1]
        ax.barh(y, [100 * summary.scores[n] for n in names], color=_BAR, height=0.7)
        ax.set_yticks(y, [_label(n) for n in names])
        ax.set_xlim(0, 100)
        ax.set_xlabel("score %")
    else:
        _nothing(ax, "nothing scored yet")
    ax.set_title(title, fontsize=10, loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _number(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _histogram(ax: Any, values: Sequence[float], xlabel: str, *, marks: bool = False) -> None:
    if not values:
        _nothing(ax, "no answers yet")
        ax.set_xlabel(xlabel)
        return
    from matplotlib.ticker import MaxNLocator

    low, high = min(values), max(values)
    if low == high:  # one bar of unknown width says less than the number
        _nothing(ax, f"all {len(values)} questions: {_number(low)}")
        ax.set_xlabel(xlabel)
        return
    bins: Any = max(5, min(40, len(values) // 4))
    if all(float(v).is_integer() for v in values) and high - low <= 40:
        bins = [x - 0.5 for x in range(int(low), int(high) + 2)]  # one bar per whole number
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.hist(values, bins=bins, color=_BAR, edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of questions
    ax.set_xlabel(xlabel)
    ax.set_ylabel("questions")
    if marks:
        for q, style in ((50, "--"), (95, ":")):
            value = percentile(values, q)
            ax.axvline(value, color=_CHANCE, linestyle=style, linewidth=1.5, label=f"p{q} {_number(value)}")
        ax.legend(loc="upper right", fontsize=8, framealpha=0.9)


def plot_latency(path: Path, predictions: Sequence[Prediction]) -> Path:
    """Seconds per answered question: a histogram with the median and the 95th percentile."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 3.5))
    _histogram(ax, [p.seconds for p in predictions], "seconds per question", marks=True)
    ax.set_title(f"latency ({len(predictions)} answered questions)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def plot_usage(path: Path, predictions: Sequence[Prediction]) -> Path:
    """Steps, tokens (in + out) and cost per question, each as a distribution."""
    plt = _pyplot()
    fig, (steps, tokens, cost) = plt.subplots(1, 3, figsize=(12.0, 3.5))
    _histogram(steps, [float(p.steps) for p in predictions], "steps per question", marks=True)
    _histogram(
        tokens,
        [float(p.input_tokens + p.output_tokens) for p in predictions],
        "tokens per question",
        marks=True,
    )
    costs = [p.cost_usd for p in predictions if p.cost_usd is not None]
    if costs or not predictions:
        _histogram(cost, costs, "cost per question (USD)", marks=True)
    else:
        _nothing(cost, "no prices configured")
        cost.set_xlabel("cost per question (USD)")
    fig.suptitle(f"usage per question ({len(predictions)} answered)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def write_plots(run_dir: Path, summary: RunSummary, predictions: Sequence[Prediction]) -> list[Path]:
    """Draw the report's plots (:data:`PLOT_FILES`) into ``run_dir``; returns their paths."""
    run_dir = Path(run_dir)
    return [
        plot_accuracy(run_dir / ACCURACY_PLOT, summary),
        plot_latency(run_dir / LATENCY_PLOT, predictions),
        plot_usage(run_dir / USAGE_PLOT, predictions),
    ]

"""Around the run page's answer: a CPU run's word that it books nothing on GPUs, above it; under it, what each strategy
shown is, in its plug-in's words, and the pages `predict --page` wrote of the run. Pure: the run's names in, HTML
out."""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles
from harness.results.invocation import page_run_words
from harness.results.values import parity_words
from reports.pages.html import esc, shared_link


def predict_links(meta: dict) -> str:
    """The pages `predict --page` wrote of this run into its site (site.read_shared_pages), each under its title and
    what it books, as the index says it (html.shared_link): the answer on a cluster at a GPU's step given, which a page
    of the run's own machine does not give; '' for none."""
    links = "; ".join(shared_link(p, up="../") for p in meta.get("predict_pages") or [])
    return f"<p>On a cluster at a GPU step given (<code>ddpbench predict --page</code>): {links}.</p>" if links else ""


def not_a_gpu_booking(meta: dict) -> str:
    """A CPU run's answer, said first under its heading: its ranks are CPU processes over gloo, so its ranking and caps
    are this machine's and name nothing to book on GPUs; then where a GPU's answer is: the run's what-if page, the
    pages `predict --page` wrote of it (predict_links, said here instead of under the answer), or the command that
    writes one. The page's top banner said 'not GPU performance', and its answer, a screen below, read 'stock
    bucket_cap_mb=1 leads: … 1.42× faster' under a 'bucket cap to use' column to a reader come for what to book.
    '' on a GPU run."""
    if meta.get("device") != "cpu":
        return ""
    whatif = (f'<a href="{esc(meta["whatif"])}">what if on {esc(meta.get("whatif_cluster") or "")}</a>, what holds '
              "on any GPU: the network's cost a step and the memory" if meta.get("whatif") else "")  # fmt: skip
    given = "; ".join(shared_link(p, up="../") for p in meta.get("predict_pages") or [])
    given = f"at a GPU step given (<code>ddpbench predict --page</code>): {given}" if given else ""
    command = f"ddpbench predict --run {page_run_words(meta)} --cluster NAME --local-step-ms MS --page FILE.html"
    where = "; ".join(filter(None, [whatif, given])) or f"<code>{esc(command)}</code> writes it for your GPU's step"
    return ('<p class="banner"><b>Not a GPU booking:</b> every rank here is a CPU process over gloo, a simulated GPU, '
            "so the ranking, steps and bucket caps below are this machine's; they name no strategy or cap to book on "
            "GPUs (a CPU's compute hides communication a GPU's would show, and its optimizer is another share of the "
            f"step). On a GPU cluster: {where}.</p>")  # fmt: skip


NOT_REGISTERED = "not registered here"
"""The legend's words for a strategy the rows name that no plug-in registers where the report is built: its own
description is in its file, not in the run."""


def strategies_legend(shown: list[str], leaders: set[str] = frozenset()) -> str:
    """What each strategy shown is, in its plug-in's registered words (`ddpbench list`), and where one is not a
    strategy to deploy (its plug-in's `instrument`), that, first where it leads a headline above; one not registered
    where the page is built (a strategy file of the run's machine, or one since removed) said so, not left out as
    if the legend were complete; '' for none."""
    said = {impl: roles.described(impl) for impl in shown}
    named = [f"<b>{esc(impl)}</b>: {esc(what or NOT_REGISTERED)}" + (f" — {esc(why)}" if why else "")
             for impl, (what, why) in said.items()]  # fmt: skip
    if not named:
        return ""
    led = [f"<b>{esc(impl)}</b> leads above but is {esc(said[impl][1])}" for impl in shown
           if impl in leaders and said[impl][1]]  # fmt: skip
    return f"<p class=caption>{'; '.join(led) + '. ' if led else ''}Strategies: {'; '.join(named)}.</p>"


def deployable(contenders: pd.DataFrame) -> pd.DataFrame:
    """`contenders` (ranked, the floor left out) from the fastest strategy to deploy on: the instruments ranked above
    it (naive, flat, bucketed: their plug-in's `instrument`), which an answer never names its leader, passed over
    (`passed_over` says them), those below kept as the rows it is judged against; all where none is one to deploy.
    A run page once ranked bucketed, "not a strategy to deploy", first, and the index named it the run's fastest."""
    instrument = [bool(roles.described(impl)[1]) for impl in contenders["impl"]] if len(contenders) else []
    first = next((k for k, out in enumerate(instrument) if not out), 0)
    return contenders.iloc[first:]


def passed_over(contenders: pd.DataFrame) -> str:
    """'bucketed ran faster but is not a strategy to deploy': the instruments `deployable` passed over; '' for none."""
    above = list(dict.fromkeys(contenders["impl"].iloc[: len(contenders) - len(deployable(contenders))]))
    if not above:
        return ""
    return f"{' and '.join(above)} ran faster but {'is' if len(above) == 1 else 'are'} not a strategy to deploy"


def only_one(contenders: pd.DataFrame) -> list[str]:
    """['the only strategy measured'] ('… to deploy measured' beside instruments passed over) where `contenders` (the
    floor left out) hold one strategy to deploy and no other, as the run page's lead() says it: hf:whisper's index
    and console answer read a bare 'fsdp 24.87 ms' where stock had failed, as if fsdp had beaten it; [] otherwise
    (two or more, or only instruments, which not_to_deploy says 'none to deploy' of)."""
    kept = deployable(contenders)
    if len(kept) != 1 or roles.described(kept.iloc[0]["impl"])[1]:
        return []
    return [f"the only strategy {'to deploy ' * bool(passed_over(contenders))}measured"]


def not_to_deploy(best: pd.Series) -> list[str]:
    """What the run page says of the leader it names that bars deploying it, for a reader who sees the name alone
    (the index): 'not a strategy to deploy' where only instruments ran (`deployable` keeps them then; the legend says
    it), 'PARITY FAILED' as the headline says it. A walkthrough's index read 'leading strategy to deploy: bucketed
    510.2 ms' where its run page said bucketed was not one to deploy and had failed parity."""
    said = ["not a strategy to deploy; none to deploy was measured"] if roles.described(best["impl"])[1] else []
    failed = parity_words(best, why=False) == "PARITY FAILED"  # numpy's bool too, as the headline reads it
    return said + ["PARITY FAILED"] * failed

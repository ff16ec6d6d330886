"""The text `dpbench audit` prints for an audit result: setup, bound, test, estimates, verdict."""

from __future__ import annotations


def format_audit(result) -> str:
    """The `dpbench audit` report of one AuditResult or OneRunAuditResult (a few lines)."""
    s = result.setup
    if s.canaries is not None:
        return _format_one_run(result)
    where = f"{s.dataset} ({result.rows} base rows)" if s.dataset else f"the recipe's own data ({result.rows} rows)"
    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.params.items()) \
        or "defaults"
    confidence = f"{100 * result.confidence:g}%"
    test = "above" if result.direction > 0 else "below"
    score = "the privacy loss of every noisy step along the canary direction" if result.threat == "all_updates" \
        else "a function of the trained model"
    lines = [
        f"audit: {s.algorithm} [{params}] on {where}, model {s.model}, canary {s.canary}, "
        f"adjacency {result.adjacency}, threat {result.threat} (score: {score})",
        f"claimed epsilon: {_claimed(result)}",
        f"audited lower bound: epsilon >= {result.epsilon_lower_bound:.3f} at {confidence} confidence "
        f"(ceiling {result.ceiling:.3f} for {result.n_evaluation} evaluation runs a side)",
        f"test: 'D1' when the score is {test} {result.threshold:.6g} (rule {result.threshold_rule}, chosen on "
        f"{result.n_selection} runs a side); on the other runs FPR = {result.fpr:.4g} (<= {result.fpr_upper:.4g}), "
        f"FNR = {result.fnr:.4g} (<= {result.fnr_upper:.4g})",
        *_estimate_lines(result),
        f"trials: {result.trials} per side ({2 * result.trials} fits, {result.chunks} chunks, {result.reused} reused; "
        f"{1000 * result.seconds_per_fit:.2f} ms per fit when run)",
        f"wall time: {result.seconds:.1f} s",
    ]
    return "\n".join(lines + _verdict(result))


def _verdict(result) -> list[str]:
    """The verdict line of an audit report (none when nothing is claimed)."""
    if result.broken:
        return [f"verdict: REFUTED -- the claimed epsilon {result.claimed_epsilon:g} is below the lower bound"]
    if result.claimed_epsilon is not None:
        return ["verdict: not refuted (the bound does not exceed the claimed epsilon)"]
    return []


def _claimed(result) -> str:
    s = result.setup
    if result.claimed_epsilon is None:
        return f"none ({s.algorithm} claims no epsilon; claim: {result.claim})"
    accounted = "" if result.accounted_epsilon is None else f"; the ledger's accountant: {result.accounted_epsilon:.3g}"
    return f"{result.claimed_epsilon:g} at delta = {s.delta:g} (claim: {result.claim}){accounted}"


def _format_one_run(result) -> str:
    """The `dpbench audit --one-run` report."""
    s, o = result.setup, result.outcome
    where = f"{s.dataset}" if s.dataset else "the recipe's own data"
    lines = [
        f"one-run audit: {s.algorithm} on {where}, model {s.model}, canary {s.canary} x {o.m} (each in with "
        f"probability 1/2; {result.rows} training rows), adjacency {result.adjacency}, threat {s.threat}",
        f"claimed epsilon: {_claimed(result)}",
        f"guesses: {o.k_pos} 'in' (highest scores), {o.k_neg} 'out' (lowest); correct {o.correct} of {o.r}",
        f"audited lower bound: epsilon >= {result.epsilon_lower_bound:.3f} at {100 * result.confidence:g}% "
        f"confidence (ceiling {result.ceiling:.3f} for {o.r} guesses among {o.m} canaries)",
        f"wall time: {result.seconds:.1f} s (training {result.fit_seconds:.1f} s, {result.reused} reused)",
    ]
    return "\n".join(lines + _verdict(result))


def _estimate_lines(result) -> list[str]:
    """The estimates of `format_audit` (not bounds: each says what it assumes)."""
    lines = []
    g, m = result.gdp, result.measured
    level = f"{100 * result.confidence:g}%"
    if g is not None:
        lines.append(f"GDP estimate (assumes a Gaussian trade-off curve; not a bound): mu = {g.mu:.3f}, "
                     f"epsilon ~ {g.epsilon:.3f} [{g.epsilon_low:.3f}, {g.epsilon_high:.3f}] ({level} bootstrap)")
    if m is not None:
        lines.append(f"measured mechanism (assumes the declared per-step form; not a bound): noise std x "
                     f"{m.noise_ratio:.3f} of declared, record in a step with rate {m.rate:.3f}, {m.steps:g} steps: "
                     f"epsilon ~ {m.epsilon:.3f} [{m.epsilon_low:.3f}, {m.epsilon_high:.3f}]")
    return lines

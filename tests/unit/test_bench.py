"""The forwarding benchmark's summary (median per backend, the documented
JSON keys) and its command line's argument checks (no network needed)."""

from __future__ import annotations

from click.testing import CliRunner

from testbed.bench import SUMMARY_KEYS, format_summary, summarize
from testbed.cli import main


def _run(mbps: float, pps: int, cpu: float | None) -> dict:
    return {"backend": "python", "mbps": mbps, "pps": pps, "cpu_s_per_mpkt": cpu}


def test_summary_is_the_median_of_each_figure() -> None:
    runs = [_run(300.0, 40000, 21.0), _run(100.0, 90000, 20.0), _run(350.5, 41000, None)]
    s = summarize("python", runs)
    assert tuple(s) == SUMMARY_KEYS == ("backend", "pps", "mbps", "cpu_s_per_mpkt")
    assert s == {"backend": "python", "pps": 41000, "mbps": 300.0, "cpu_s_per_mpkt": 20.5}
    even = summarize("pypy", [_run(1.0, 3, 1.0), _run(2.0, 4, 2.0)])
    assert even["pps"] == 4 and isinstance(even["pps"], int) and even["mbps"] == 1.5
    assert "python" in format_summary([s]) and "300.0" in format_summary([s])


def test_cli_rejects_unknown_backends_and_bad_counts() -> None:
    r = CliRunner().invoke(main, ["bench", "forwarding", "--backend", "gpu"])
    assert r.exit_code == 2 and "python, pypy" in r.output
    r = CliRunner().invoke(main, ["bench", "forwarding", "--runs", "0"])
    assert r.exit_code != 0

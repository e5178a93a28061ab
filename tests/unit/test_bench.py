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


def test_the_sim_bench_json_is_a_record_the_docs_render() -> None:
    """``testbed bench sim --json`` names its command, commit and machine
    beside the figures, as results/reference keeps them; the measurements
    page turns it into a table."""
    import json
    import sys
    from pathlib import Path

    r = CliRunner().invoke(main, ["bench", "sim", "--ranks", "8", "--chunk-kib", "2",
                                  "--payload", "phantom", "--interpreter", "cpython",
                                  "--no-ns3", "--json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    assert rec["command"] == ("testbed bench sim --ranks 8 --chunk-kib 2 --link-gbps 10 "
                              "--payload phantom --interpreter cpython --no-ns3 --json")
    assert rec["machine"]["cpus"] and "commit" in rec and rec["ns3"] is None
    (fig,) = rec["sim"]
    assert fig["ranks"] == 8 and fig["packet_hops"] > 0 and fig["payload"] == "phantom"
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "hooks"))
    try:
        from experiment_pages import _sim_bench_rows
    finally:
        sys.path.pop(0)
    rows = _sim_bench_rows(rec)
    assert rows[2].startswith("| 8 (2 x 2) | 2 KiB | phantom | CPython")

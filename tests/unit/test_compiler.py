"""Compiler driver tests: caching, errors, the command line."""

from __future__ import annotations

import pytest
from test_backend_support import Harness, program

from switches.soft import compiler
from switches.soft.frontend.source import P4Error


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_second_compile_uses_cache(tmp_path, monkeypatch):
    p = tmp_path / "p.p4"
    p.write_text(program("hdr.h.a = 1;"))
    m1 = compiler.compile_program(p)
    assert list((tmp_path / "cache" / "p4testbed").glob("*.json"))

    def boom(*a, **k):
        raise AssertionError("compiler re-ran on an unchanged program")

    monkeypatch.setattr(compiler, "generate_source", boom)
    m2 = compiler.compile_program(p)
    assert m2.SOURCE == m1.SOURCE
    assert m2.INFO == m1.INFO


def test_changed_include_misses_cache(tmp_path, monkeypatch):
    inc = tmp_path / "consts.p4"
    inc.write_text("const bit<8> K_VAL = 1;\n")
    p = tmp_path / "p.p4"
    p.write_text('#include "consts.p4"\n' + program("hdr.h.a = K_VAL;"))
    h1 = Harness(p.read_text(), tmp_path, "p")
    assert h1.run(bytes(4))[0][0] == 1
    inc.write_text("const bit<8> K_VAL = 2;\n")
    calls = []
    real = compiler.generate_source

    def spy(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(compiler, "generate_source", spy)
    h2 = Harness(p.read_text(), tmp_path, "p")
    assert calls, "an edited include must recompile"
    assert h2.run(bytes(4))[0][0] == 2


def test_defines_are_part_of_the_key(tmp_path):
    p = tmp_path / "p.p4"
    p.write_text("#ifndef VAL\n#define VAL 3\n#endif\n" + program("hdr.h.a = VAL;"))
    from test_backend_support import FakeServices

    outs = []
    for defines in (None, {"VAL": "7"}, None):
        m = compiler.compile_program(p, defines=defines)
        prog = m.make_program(FakeServices(m.INFO))
        st = prog.new_state()
        prog.parse(st, bytes(4))
        prog.ingress(st)
        outs.append(prog.deparse(st)[0])
    assert outs == [3, 7, 3]


def test_errors_raise_p4error_with_location(tmp_path):
    p = tmp_path / "bad.p4"
    p.write_text(program("hdr.h.zz = 1;"))
    with pytest.raises(P4Error) as ei:
        compiler.compile_program(p)
    assert str(ei.value).startswith(f"{p}:")


def test_command_line_writes_module(tmp_path, capsys):
    p = tmp_path / "p.p4"
    p.write_text(program("hdr.h.a = 1;"))
    out = tmp_path / "p.py"
    assert compiler.main([str(p), "-o", str(out)]) == 0
    text = out.read_text()
    assert "def make_program(rt):" in text and "INFO = ProgramInfo(" in text
    mod = compiler.load_source(text, "p_cli")
    assert mod.INFO.name == "p"
    bad = tmp_path / "bad.p4"
    bad.write_text("control {")
    assert compiler.main([str(bad)]) == 1
    assert str(bad) in capsys.readouterr().err

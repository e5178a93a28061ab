"""The BMv2 target: p4c + simple_switch_grpc, where installed (the Vagrant VM).

- :mod:`switches.bmv2.compile`: ``compile_bmv2(program, out_dir)`` -> (bmv2
  JSON, P4Info text), cached; p4c's errors as ``file:line:col``.
- :mod:`switches.bmv2.launch`: the simple_switch_grpc command line and the
  start-up wait (no Mininet needed).
- :mod:`switches.bmv2.control`: P4Runtime pipeline push, simple_switch_CLI
  batches and the CLI's transport (``ThriftCli``).
- :mod:`switches.bmv2.node`: ``BMv2Switch``, the Mininet node.
- :mod:`switches.bmv2.stf`: the project's STF tests on BMv2 (root).

Target selection (soft or bmv2) is :mod:`switches.targets`.
"""

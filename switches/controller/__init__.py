"""The switch clients: one controller API for every target.

- :mod:`switches.controller.api`: :class:`~switches.controller.api.Controller`
  (what every backend offers), ``ControllerError``, ``TableEntry`` and the
  value forms names and matches take;
- :mod:`switches.controller.cli`: ``CliController``, the API over
  simple_switch_CLI verbs;
- :mod:`switches.controller.p4runtime`: ``P4RuntimeController``, the API over
  P4Runtime (gRPC), with a ``CliController`` for queue settings.

Which target's CLI is reached how is :mod:`switches.targets`'
(``SOFT.cli_controller(port)``, ``BMV2.cli_controller(port)``).
"""

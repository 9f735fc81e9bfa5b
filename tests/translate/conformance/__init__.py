"""Test-only code of the translators' conformance (it serves the tests, so it lives here).

* :mod:`conformance.suite`: op by op against float64 ONNX, one-node models of
  :mod:`conformance.catalog` (``python -m conformance.suite --library jax``, run from
  ``tests/translate``);
* :mod:`conformance.backend_suite`: ONNX's backend node tests against the expectation files
  in ``tests/translate/expectations`` (``python -m conformance.backend_suite --library jax``).

``tests/translate/conftest.py`` puts ``tests/translate`` on ``sys.path``.
"""

"""Imported once by the analysis pool's fork server (:mod:`anpred.pipeline.collect_pool`):
loads the compiled loops there, so that every process forked from it has them loaded
instead of loading them itself (numba's import and cached code: ~0.9 s per process).
"""

from anpred.analysis import onepass

onepass.warm()

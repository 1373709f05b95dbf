"""Builders and runners shared by the test modules.

A test module imports its helpers from here (and its fixtures come from `conftest.py`), never
from another test module; `tests/test_test_layout.py` holds that rule.
"""

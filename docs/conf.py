"""Sphinx configuration for django-snowflake-id.

Built offline with warnings as errors: ``sphinx-build -W --keep-going -b html docs OUT``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import django
from sphinx.application import Sphinx
from sphinx.util import logging

ROOT = Path(__file__).resolve().parent.parent
# The repository root, so autodoc imports this checkout and tests.settings is importable.
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

import django_snowflake  # noqa: E402
from django_snowflake.layout import PRESETS, BitLayout  # noqa: E402

project = "django-snowflake-id"
author = "django-snowflake-id contributors"
copyright = "2025, django-snowflake-id contributors"
release = django_snowflake.__version__
version = ".".join(release.split(".")[:2])

# No intersphinx: the build runs without network access.
extensions = ["sphinx.ext.autodoc"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True

exclude_patterns = ["_build"]
html_theme = "alabaster"
html_theme_options = {"description": "Snowflake primary keys for Django"}
# custom.css: a column that grows with the window, code blocks that scroll visibly.
html_static_path = ["_static"]
html_css_files = ["custom.css"]


def _check_preset_numbers(app: Sphinx, docname: str, source: list[str]) -> None:
    """Fail the build (a warning, under -W) if layouts.rst disagrees with the code."""
    if docname != "layouts":
        return
    logger = logging.getLogger(__name__)
    lines = source[0].splitlines()
    for name in PRESETS:
        layout = BitLayout.preset(name)
        end = layout.lifespan_end
        stamp = end.strftime("%Y-%m-%d %H:%M:%S")
        if end.microsecond:
            stamp += f".{end.microsecond // 1000:03d}"
        facts = (f"``{name}``", f"{layout.ids_per_second:,}", f"{layout.workers:,}", stamp)
        # One row of the summary table must carry all of them.
        if not any(all(fact in line for fact in facts) for line in lines):
            logger.warning(
                "layouts.rst: no table row reads %s (computed from the code)",
                " / ".join(facts),
                location=docname,
            )


def setup(app: Sphinx) -> None:
    app.connect("source-read", _check_preset_numbers)

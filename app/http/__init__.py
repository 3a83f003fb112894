"""The HTTP service: the application factory (:func:`create_app`), its dependencies, one
router per surface (``routes``), what runs before and around them (``middleware``) and the
chat protocols' wire formats (``protocols``).

:func:`create_app` is imported on first use: the command line reads the server's settings
from here without loading FastAPI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from app.http.factory import create_app

__all__ = ["create_app"]

__getattr__ = lazy_attributes(__name__, {"create_app": "app.http.factory"})

"""The error hierarchy: stable codes that the CLI, HTTP layer and stream all rely on."""

from __future__ import annotations

import pipelines
from app.http.errors import HTTP_STATUS, http_status_for
from pipelines.core import errors


def error_classes() -> list[type[errors.ReactomeAnswersError]]:
    return [getattr(errors, name) for name in errors.__all__ if name.endswith("Error")]


def test_every_error_is_one_of_ours_with_a_distinct_code() -> None:
    classes = error_classes()
    assert all(issubclass(cls, errors.ReactomeAnswersError) for cls in classes)
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes))


def test_http_statuses_separate_the_callers_fault_from_ours() -> None:
    assert http_status_for(errors.InputError.code) == 422
    assert http_status_for(errors.NotIngestedError.code) == 503
    assert http_status_for("timeout") == 504
    # Every code has its own status, in the HTTP layer (the pipeline knows no HTTP).
    assert set(HTTP_STATUS) == set(errors.ErrorCode)
    assert all(400 <= status < 600 for status in HTTP_STATUS.values())


def test_every_exception_code_is_a_listed_code() -> None:
    assert {cls.code for cls in error_classes()} <= set(errors.ErrorCode)
    # The two codes no exception carries are the ones the pipeline sends itself.
    assert set(errors.ErrorCode) - {cls.code for cls in error_classes()} == {
        "timeout",
        "cancelled",
    }


def test_message_and_fix_read_as_one_line() -> None:
    error = errors.NotIngestedError(
        "collection 'reactome' is empty", fix="run 'reactome-answers ingest --sample'"
    )
    assert str(error) == "collection 'reactome' is empty; run 'reactome-answers ingest --sample'"
    assert (error.message, error.fix) == (
        "collection 'reactome' is empty",
        "run 'reactome-answers ingest --sample'",
    )


def test_package_reexports_the_hierarchy() -> None:
    for name in errors.__all__:
        assert getattr(pipelines, name) is getattr(errors, name)


def test_an_error_events_code_maps_to_its_http_status() -> None:
    status = http_status_for
    assert status("model_failed") == 502
    assert status("timeout") == 504
    assert status("store_unavailable") == status("not_ingested") == 503
    assert status("handler_failed") == status("internal") == 500
    assert status("cancelled") == 499
    assert status("something new") == 500

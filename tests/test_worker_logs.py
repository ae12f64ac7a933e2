"""distributed's "Compute Failed" log: no task arguments (witness data), no expected failures."""

from __future__ import annotations

import logging

from distprove.cluster.state import TaskFailureLogFilter, install_task_log_filter


def _record(exc_text: str) -> logging.LogRecord:
    # The call distributed.worker makes when a task raises (see Worker._execute).
    return logging.LogRecord(
        "distributed.worker", logging.ERROR, __file__, 1,
        "Compute Failed\nKey:       %s\nState:     %s\nTask:  %s\nException: %r\nTraceback: %r\n",
        (("msm-windows", "w0", "A", 0, "t"), "executing", "msm_windows(Prepared(values=array([[123456789, 42]])))",
         exc_text, "  File ..."),
        None,
    )


def test_task_arguments_are_withheld() -> None:
    rec = _record("MemoryError('out of memory')")
    assert TaskFailureLogFilter().filter(rec) is True
    text = rec.getMessage()
    assert "123456789" not in text and "withheld" in text and "out of memory" in text


def test_expected_failures_are_not_logged() -> None:
    for exc in ("FormatError('w.wtns: empty file')", "InvalidProofError('w.wtns: does not verify')"):
        assert TaskFailureLogFilter().filter(_record(exc)) is False


def test_other_records_pass_untouched() -> None:
    rec = logging.LogRecord("distributed.worker", logging.INFO, __file__, 1, "Start worker at %s", ("tcp://x",), None)
    assert TaskFailureLogFilter().filter(rec) is True and rec.getMessage() == "Start worker at tcp://x"


def test_installed_once() -> None:
    install_task_log_filter()
    install_task_log_filter()
    filters = logging.getLogger("distributed.worker").filters
    assert sum(isinstance(f, TaskFailureLogFilter) for f in filters) == 1

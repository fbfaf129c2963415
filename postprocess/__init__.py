"""State-delta extraction from the model's replies (a second, structured model call)."""

from .extract import (
    Attempt,
    Call,
    CallResult,
    Extraction,
    describe_failure,
    extract_delta,
    parse_delta,
    request_messages,
    unfinished,
)
from .schema import delta_json_schema, response_format

__all__ = [
    "Attempt",
    "Call",
    "CallResult",
    "Extraction",
    "delta_json_schema",
    "describe_failure",
    "extract_delta",
    "parse_delta",
    "request_messages",
    "response_format",
    "unfinished",
]

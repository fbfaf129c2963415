"""The model gateway: every model call goes through litellm, asynchronously.

- Streamed replies: each piece of text (and of reasoning, for models that return it)
  is handed to a callback as it arrives; usage and latency are recorded.
- The cheapest route litellm has for each provider (:func:`route`): an OpenAI-compatible
  server (OpenAI itself, llama.cpp, vLLM, Ollama, LM Studio...) is called through
  litellm's own HTTP handler for such servers (its ``hosted_vllm`` provider), not through
  the openai SDK it uses for ``openai/`` models, whose request typing walks every message
  of the prompt in Python: a long campaign's turn would pay for it on every call. Models
  for which litellm rewrites the request (OpenAI's reasoning models) keep litellm's own
  route, as does every other provider.
- Retries: a rate limit (429), a server error (5xx), a timeout or a dropped
  connection is retried with exponential backoff, honouring ``Retry-After`` (and the
  ``retry-after-ms`` OpenAI sends): by the openai SDK on litellm's routes that use it
  (``max_retries``), else here, with litellm's own rules (``litellm.should_retry``,
  ``calculate_retry_after``). After the last retry the player gets one clear
  :class:`ModelError`. Errors that a retry cannot fix (a key refused, an unknown model,
  a prompt over the context window) are not retried.
- A key missing is said before any request (:func:`no_key_error`, naming the variables
  litellm reads for the provider, from ``litellm.validate_environment``): nothing is sent.
- A stream that breaks off after some text keeps that text, marked incomplete, with one
  short line saying why (litellm's message repeats the chain of wrapped errors); so does
  :meth:`Gateway.interrupt` (Ctrl+C): the caller stores a partial reply, never loses it.
  A stream with no text yet is a :class:`ModelError` when it breaks or ends, and an
  empty, incomplete :class:`Completion` when the player interrupted it (the caller
  then stores no reply: an empty message would be sent to the model in later prompts).

litellm is imported on first use (it costs seconds), with
``LITELLM_LOCAL_MODEL_COST_MAP=True``: the engine never calls out on its own. What it
loads (over a thousand modules, some 500,000 objects, and the tokenizer's tables) stays
for the life of the process, so it is loaded with the cyclic garbage collector paused
and then frozen out of its passes (:func:`lasting`): the collector would otherwise walk
it again and again while it loads (about a third of the import's CPU) and on every full
pass afterwards (hundreds of milliseconds each, a stall of every request of a server).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import Any

from .config import DEFAULT_CONTEXT_WINDOW, ModelConfig
from .errors import ModelError

__all__ = [
    "INTERRUPTED",
    "Completion",
    "Gateway",
    "OnEvent",
    "litellm_module",
    "missing_key_variables",
    "no_key_error",
    "route",
]

#: ``Completion.stopped_by`` of a reply the player stopped (Ctrl+C, a client gone).
INTERRUPTED = "interrupted by the player"

#: Receives ``("token" | "reasoning", text)`` while a reply streams in.
OnEvent = Callable[[str, str], None]


@contextmanager
def lasting() -> Iterator[None]:
    """Around loading what lives as long as the process (a library's modules, a
    tokenizer's tables): the cyclic garbage collector paused meanwhile, then everything
    alive moved out of its reach (``gc.freeze``), so that no later pass walks it again.
    Objects frozen are still freed when their last reference goes; only a cycle among
    them would stay, and what is loaded here is never dropped."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@cache
def litellm_module() -> ModuleType:
    """litellm, imported once (:func:`lasting`), offline, and without the copy of every
    call's messages its success logging makes to shorten base64 images in them (nothing
    here logs messages; the copy grows with the history)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("MAX_BASE64_LENGTH_FOR_LOGGING", "0")
    with lasting():
        import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def openai_errors() -> type[Exception]:
    """The base class of every provider error litellm raises (it builds on openai's)."""
    litellm_module()
    import openai

    return openai.OpenAIError


#: Providers litellm sends through the openai SDK that take any OpenAI-compatible base URL.
_SDK_ROUTED = frozenset({"openai", "custom_openai", "lm_studio", "llamafile"})
#: litellm's own HTTP route for an OpenAI-compatible server (no SDK in between).
_HTTP_ROUTE = "hosted_vllm"
_OPENAI_BASE = "https://api.openai.com/v1"


@cache
def _plain_openai_chat(name: str) -> bool:
    """Whether litellm sends model ``name`` to OpenAI as a plain chat request (its
    ``OpenAIGPTConfig``, which the HTTP route's configuration extends; a name it does
    not know, such as a local server's, gets the same), rather than rewriting it
    (reasoning models: ``max_completion_tokens``, dropped parameters)."""
    litellm_module()
    from litellm.llms.openai.chat.gpt_transformation import (
        OpenAIGPTConfig,
        OpenAIUnknownModelConfig,
    )
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager

    config = ProviderConfigManager.get_provider_chat_config(name, LlmProviders.OPENAI)
    return type(config) in (OpenAIGPTConfig, OpenAIUnknownModelConfig)


def route(config: ModelConfig) -> dict[str, Any]:
    """How litellm is asked to call ``config``'s model: ``model`` and, for an
    OpenAI-compatible server litellm would otherwise reach through the openai SDK, its
    own HTTP route (``custom_llm_provider``, ``api_base``, ``api_key``). Only ``model``:
    litellm's usual route."""
    return dict(_route(config.model, config.api_base, config.api_key))


@cache
def _route(model: str, api_base: str | None, api_key: str | None) -> tuple[tuple[str, Any], ...]:
    """:func:`route`, worked out once per model and server (the server's address and
    key as litellm finds them for the provider: ``LM_STUDIO_API_BASE``, llamafile's
    default, ``OPENAI_BASE_URL``...)."""
    provider, _, name = model.partition("/")
    if provider not in _SDK_ROUTED or not name:
        return (("model", model),)
    litellm = litellm_module()
    name, _provider, key, base = litellm.get_llm_provider(model, api_base=api_base)
    if base is None and provider == "openai":
        environ = os.environ
        base = environ.get("OPENAI_BASE_URL") or environ.get("OPENAI_API_BASE") or _OPENAI_BASE
    if base is None or not _plain_openai_chat(name):
        return (("model", model),)
    key = api_key or key or os.environ.get("OPENAI_API_KEY") or "no-key"
    return (
        ("model", name),
        ("custom_llm_provider", _HTTP_ROUTE),
        ("api_base", base),
        ("api_key", key),
    )


@dataclass
class Completion:
    """One model call's answer."""

    content: str
    reasoning: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0
    first_token_ms: float | None = None
    finish_reason: str | None = None
    incomplete: bool = False
    """The text stopped before the model finished (stream cut, or interrupted)."""
    stopped_by: str | None = None
    """Why it is incomplete, in words."""
    model: str = ""


class Gateway:
    """Calls models through litellm. One per turn loop; :meth:`interrupt` stops the
    reply being streamed."""

    def __init__(self) -> None:
        self._waiting = False
        self._streaming: asyncio.Task[None] | None = None
        self._interrupted = False

    # -- calls ----------------------------------------------------------------------

    async def stream(
        self,
        config: ModelConfig,
        messages: Sequence[Mapping[str, Any]],
        on_event: OnEvent | None = None,
    ) -> Completion:
        """Generate a reply, streamed: ``on_event`` gets each piece as it arrives.

        Raises:
            ModelError: the call failed (after its retries), or the stream broke off or
                ended before any text came (unless the player interrupted it: then the
                completion is empty and incomplete).
        """
        started = time.perf_counter()
        self._waiting = True
        try:
            response = await self._call(config, messages, stream=True)
        finally:
            self._waiting = False
        pieces: list[str] = []
        thoughts: list[str] = []
        result = Completion("", model=config.model)

        async def consume() -> None:
            async for chunk in response:
                usage = getattr(chunk, "usage", None)
                if usage:
                    result.usage = _usage(usage)
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                thought = getattr(delta, "reasoning_content", None)
                if thought:
                    thoughts.append(thought)
                    if on_event is not None:
                        on_event("reasoning", thought)
                text = delta.content
                if text:
                    if result.first_token_ms is None:
                        result.first_token_ms = (time.perf_counter() - started) * 1000
                    pieces.append(text)
                    if on_event is not None:
                        on_event("token", text)
                if choice.finish_reason:
                    result.finish_reason = choice.finish_reason

        self._interrupted = False
        self._streaming = asyncio.ensure_future(consume())
        try:
            await self._streaming
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not self._interrupted or (current is not None and current.cancelling()):
                raise
            result.incomplete, result.stopped_by = True, INTERRUPTED
        except openai_errors() as error:  # the stream broke off (litellm wraps the cause)
            if not "".join(pieces).strip():
                raise _model_error(error, config) from None
            result.incomplete = True
            result.stopped_by = f"the stream broke off: {_broken_stream(error, config)}"
        finally:
            self._streaming = None
        result.content = "".join(pieces)
        result.reasoning = "".join(thoughts)
        result.latency_ms = (time.perf_counter() - started) * 1000
        if not result.incomplete and result.finish_reason is None:
            result.incomplete = True
            result.stopped_by = "the stream ended before the model finished"
        if not result.content.strip() and result.stopped_by != INTERRUPTED:
            where = f" at {config.api_base}" if config.api_base else ""
            ended = (
                f"finish reason: {result.finish_reason}"
                if result.finish_reason
                else "the stream ended before the model finished"
            )
            raise ModelError(
                f"model {config.model}{where} returned an empty reply ({ended})", "empty"
            )
        return result

    async def complete(
        self,
        config: ModelConfig,
        messages: Sequence[Mapping[str, Any]],
        *,
        response_format: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One call, not streamed (extraction, summaries).

        Raises:
            ModelError: the call failed after its retries.
        """
        started = time.perf_counter()
        extra = {"response_format": dict(response_format)} if response_format else {}
        response = await self._call(config, messages, stream=False, **extra)
        choice = response.choices[0]
        message = choice.message
        return Completion(
            content=message.content or "",
            reasoning=getattr(message, "reasoning_content", None) or "",
            usage=_usage(getattr(response, "usage", None)),
            latency_ms=(time.perf_counter() - started) * 1000,
            finish_reason=choice.finish_reason,
            model=config.model,
        )

    async def aclose(self) -> None:
        """Close the HTTP clients litellm keeps for the running event loop (call it
        before the loop ends: litellm caches clients per loop)."""
        litellm = litellm_module()
        await litellm.close_litellm_async_clients()
        cache = litellm.in_memory_llm_clients_cache
        for client in list(getattr(cache, "cache_dict", {}).values()):
            close = getattr(client, "close", None)
            # sync clients (embeddings use them) would otherwise leak their sockets
            if callable(close) and not inspect.iscoroutinefunction(close):
                close()
        cache.flush_cache()

    @property
    def waiting(self) -> bool:
        """A :meth:`stream` call is waiting for the model's answer (no stream yet)."""
        return self._waiting

    def interrupt(self) -> bool:
        """Stop the reply being streamed (its text so far is kept); whether one was."""
        task = self._streaming
        if task is None or task.done():
            return False
        self._interrupted = True
        task.cancel()
        return True

    async def warm(self, config: ModelConfig) -> None:
        """Load what the first call to ``config``'s model needs (litellm, its route's
        modules, the tokenizer, the model's window) without calling it: a streamed call
        answered by litellm itself (``mock_response``) goes the same way through litellm.
        The first turn of a process then starts at once. litellm itself is loaded out of
        the collector's reach (:func:`litellm_module`); the call is not wrapped in
        :func:`lasting`: it awaits, and other requests run meanwhile (their objects must
        stay collectable)."""
        litellm = litellm_module()
        arguments = _arguments(config, [{"role": "user", "content": "warm"}], stream=True)
        arguments.pop("max_retries", None)
        response = await litellm.acompletion(**arguments, mock_response="warm")
        async for _chunk in response:
            pass
        self.counter(config)("warm")
        self.context_window(config)

    async def _call(
        self,
        config: ModelConfig,
        messages: Sequence[Mapping[str, Any]],
        *,
        stream: bool,
        **extra: Any,
    ) -> Any:
        litellm = litellm_module()
        missing = no_key_error(config)
        if missing is not None:
            raise missing
        arguments = _arguments(config, messages, stream=stream, **extra)
        # the openai SDK retries on litellm's routes through it; litellm's own HTTP
        # handlers do not, so this loop does
        ours = "custom_llm_provider" in arguments
        attempts = config.retries + 1 if ours else 1
        for attempt in range(1, attempts + 1):
            try:
                return await litellm.acompletion(**arguments)
            except openai_errors() as error:
                retryable = _retryable(error)
                if attempt == attempts or not retryable:
                    # the SDK made its own retries of what it retries
                    made = attempt if ours else (config.retries + 1 if retryable else 1)
                    raise _model_error(error, config, attempts=made) from None
                await asyncio.sleep(_retry_delay(error, attempts - attempt, config.retries))
        raise AssertionError("unreachable")  # the loop returns or raises

    # -- what litellm knows about models --------------------------------------------

    @staticmethod
    def context_window(config: ModelConfig) -> int:
        """The tokens the model accepts: the configured window, else litellm's model
        list, else :data:`DEFAULT_CONTEXT_WINDOW`."""
        return config.context_window or _listed_window(config.model)

    @staticmethod
    def counter(config: ModelConfig) -> Callable[[str], int]:
        """Counts the tokens of a text for the model (litellm's tokenizer for it)."""
        litellm = litellm_module()
        model = config.model

        def count(text: str) -> int:
            return int(litellm.token_counter(model=model, text=text))

        return count

    @staticmethod
    def tokenizer(config: ModelConfig) -> str:
        """The tokenizer :meth:`counter` counts with, for people: a Hugging Face one
        litellm knows the model by (``huggingface llama3``), else tiktoken's encoding for
        it (``tiktoken cl100k_base``, litellm's default, bundled with litellm: no model
        named, or one it does not know)."""
        litellm_module()
        from litellm.litellm_core_utils.token_counter import openai_tokenizer_encoding_name
        from litellm.utils import huggingface_tokenizer_kind

        kind = huggingface_tokenizer_kind(config.model)
        if kind is not None:
            return f"huggingface {kind}"
        return f"tiktoken {openai_tokenizer_encoding_name(config.model)}"


def missing_key_variables(config: ModelConfig) -> tuple[str, ...]:
    """The environment variables that could hold the key ``config``'s provider needs,
    when none of them is set (as ``litellm.validate_environment`` lists them: one for
    most providers, two for Gemini); empty when the call can be made: a key is given,
    the model is served from a base URL of the player's own (a local server may need
    no key), the provider needs none, or it needs more than a key (cloud credentials,
    a deployment's address: the provider's own errors say which)."""
    if config.api_key or config.api_base:
        return ()
    provider = config.model.partition("/")[0]
    environ = os.environ
    if provider == "openai" and (environ.get("OPENAI_BASE_URL") or environ.get("OPENAI_API_BASE")):
        return ()
    found = litellm_module().validate_environment(config.model)
    missing = [str(name) for name in found.get("missing_keys") or ()]
    if found.get("keys_in_environment") or not missing:
        return ()
    if not all(name.endswith("_API_KEY") for name in missing):
        return ()
    return tuple(missing)


def no_key_error(config: ModelConfig) -> ModelError | None:
    """The error a call with ``config`` would raise before sending anything because the
    provider's key is not set (:func:`missing_key_variables`), or ``None``."""
    variables = missing_key_variables(config)
    if not variables:
        return None
    return ModelError(
        f"no API key for {config.model}: set {' or '.join(variables)} (read by "
        f"litellm for {_provider(config)}) or CLOTHO_API_KEY; nothing was sent",
        "no_key",
    )


def _provider(config: ModelConfig) -> str:
    """The provider's name in ``config``'s model string (``openai`` for a bare name)."""
    provider, slash, _name = config.model.partition("/")
    return provider if slash else "openai"


def _key_variables(config: ModelConfig) -> str:
    """Where the key of ``config``'s call came from, for a message: its ``key_source``
    (``CLOTHO_API_KEY``, a connection profile's file) when one was given, else the
    provider's variables that are set (those litellm read: their names start with the
    provider's); empty when there is none."""
    if config.api_key:
        return config.key_source
    provider = re.sub(r"[^A-Z0-9]", "", _provider(config).upper())
    named = sorted(
        name
        for name, value in os.environ.items()
        if value
        and name.endswith(("_API_KEY", "_AUTH_TOKEN"))
        and re.sub(r"[^A-Z0-9]", "", name.upper()).startswith(provider)
    )
    return " or ".join(named)


@cache
def _listed_window(model: str) -> int:
    """The window litellm's (local) model list gives a model, looked up once per model."""
    litellm = litellm_module()
    try:
        info = litellm.get_model_info(model)
    except Exception:  # noqa: BLE001 - litellm raises bare Exception for unknown models
        return DEFAULT_CONTEXT_WINDOW
    return int(info.get("max_input_tokens") or info.get("max_tokens") or DEFAULT_CONTEXT_WINDOW)


def _arguments(
    config: ModelConfig, messages: Sequence[Mapping[str, Any]], *, stream: bool, **extra: Any
) -> dict[str, Any]:
    """What ``litellm.acompletion`` is given for a call (the messages as they are: the
    prompt's own list, not a copy)."""
    arguments: dict[str, Any] = {
        **config.params,
        **extra,
        "messages": messages if isinstance(messages, list) else list(messages),
        "stream": stream,
        "timeout": config.timeout,
    }
    if stream:
        arguments["stream_options"] = {"include_usage": True}
    if config.api_base:
        arguments["api_base"] = config.api_base
    if config.api_key:
        arguments["api_key"] = config.api_key
    elif config.api_base:
        # a local OpenAI-compatible server needs no key, but the client wants one
        arguments["api_key"] = os.environ.get("OPENAI_API_KEY") or "no-key"
    routed = route(config)
    arguments.update(routed)
    # the SDK's own retries where litellm goes through it; Gateway._call's loop elsewhere
    arguments["max_retries"] = 0 if "custom_llm_provider" in routed else config.retries
    return arguments


#: How litellm and the SDKs word a key missing when they refuse to send without one
#: (as a server error, HTTP 500, for some providers).
_NO_CREDENTIALS = re.compile(
    r"\bmissing\b[^.]{0,40}?\b(?:credentials|api[ _-]?key)\b", re.IGNORECASE
)


def _missing_credentials(error: BaseException) -> bool:
    """The error is a client's refusal to send without a key (no server was asked)."""
    return _NO_CREDENTIALS.search(str(error)) is not None


def _retryable(error: BaseException) -> bool:
    """What the openai SDK retries: timeouts, dropped connections, 408, 409, 429, 5xx."""
    exceptions = litellm_module().exceptions
    if isinstance(error, exceptions.MidStreamFallbackError) or _missing_credentials(error):
        return False
    if isinstance(error, exceptions.Timeout | exceptions.APIConnectionError):
        return True
    if _transport_failure(error) is not None:
        return True
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and bool(litellm_module().should_retry(status))


def _transport_failure(error: BaseException) -> str | None:
    """``"timeout"`` or ``"connection"`` when the request never got an answer: litellm's
    HTTP handlers report a refused connection or a timeout of their transport (httpx) as
    a server error (HTTP 500), the cause kept in the chain."""
    import httpx

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, httpx.TimeoutException):
            return "timeout"
        if isinstance(current, httpx.TransportError):
            return "connection"
        current = current.__cause__ or current.__context__
    return None


def _retry_delay(error: BaseException, remaining: int, retries: int) -> float:
    """Seconds before the next attempt: the server's ``retry-after-ms`` (OpenAI's, which
    the SDK honours), else litellm's rule (``Retry-After`` up to a minute, else
    exponential backoff with jitter)."""
    from litellm.utils import calculate_retry_after

    headers = getattr(error, "litellm_response_headers", None) or getattr(
        getattr(error, "response", None), "headers", None
    )
    if headers:
        try:
            milliseconds = float(headers.get("retry-after-ms", ""))
        except ValueError:
            pass
        else:
            if 0 <= milliseconds <= 60_000:
                return milliseconds / 1000
    return float(calculate_retry_after(remaining, retries, headers))


def _usage(usage: Any) -> dict[str, Any]:
    if not usage:
        return {}
    if hasattr(usage, "model_dump"):
        usage = usage.model_dump()
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {key: usage.get(key) for key in keys if usage.get(key) is not None}


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _cause(error: BaseException) -> BaseException:
    """The error litellm wrapped in a mid-stream error (the one that says what happened)."""
    seen = {id(error)}
    while True:
        inner = getattr(error, "original_exception", None)
        if not isinstance(inner, BaseException) or id(inner) in seen:
            return error
        seen.add(id(inner))
        error = inner


_WRAPPERS = re.compile(
    r"^(?:litellm\.)?(?:\w+(?:Error|Exception))(?::| -)\s*|^OpenAIException\s*-\s*"
)


def _detail(error: BaseException, limit: int = 160) -> str:
    """The first line of an error's message without litellm's repeated prefixes
    ("litellm.APIConnectionError: APIConnectionError: OpenAIException - ...") and
    without the copy of the wrapped error it appends ("Original exception: ...")."""
    text = _first_line(error).split(" Original exception:")[0].strip()
    while True:
        shorter = _WRAPPERS.sub("", text, count=1).strip()
        if shorter == text or not shorter:
            break
        text = shorter
    text = _error_message(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_message(text: str) -> str:
    """The ``error.message`` of an OpenAI-style error body that litellm passed on as
    it came (its HTTP route does), else the text itself."""
    if not text.startswith("{"):
        return text
    try:
        body = json.loads(text)
    except ValueError:
        return text
    inner = body.get("error") if isinstance(body, dict) else None
    message = inner.get("message") if isinstance(inner, dict) else None
    return message.strip() if isinstance(message, str) and message.strip() else text


def _broken_stream(error: BaseException, config: ModelConfig) -> str:
    """Why a stream broke off, in a few words."""
    exceptions = litellm_module().exceptions
    cause = _cause(error)
    if isinstance(cause, exceptions.Timeout):
        return f"the model sent nothing for {config.timeout:g} s"
    if isinstance(cause, exceptions.APIConnectionError):
        return "the model server closed the connection mid-reply"
    status = getattr(cause, "status_code", None)
    return f"the model server failed mid-reply{f' (HTTP {status})' if status else ''}: " + _detail(
        cause
    )


def _model_error(error: Exception, config: ModelConfig, *, attempts: int = 1) -> ModelError:
    """A provider's error as a message a player can act on (``attempts``: the calls
    made, retries included)."""
    exceptions = litellm_module().exceptions
    where = f" at {config.api_base}" if config.api_base else ""
    if isinstance(error, exceptions.MidStreamFallbackError):  # the stream began, then broke
        return ModelError(
            f"the stream from {config.model}{where} broke off before any text: "
            f"{_broken_stream(error, config)}",
            "connection",
            status=getattr(error, "status_code", None),
        )
    status = getattr(error, "status_code", None)
    detail = _detail(error)
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    transport = _transport_failure(error)
    if transport is not None:
        status = None  # no server answered: litellm's 500 is its own
    if isinstance(error, exceptions.ContextWindowExceededError):
        return ModelError(
            f"the prompt is longer than the context window of {config.model}: set a smaller "
            f"context_window in the campaign's [model] settings ({detail})",
            "context_window",
            status=status,
        )
    if transport is None and _missing_credentials(error) and not _key_variables(config):
        return ModelError(
            f"no API key for {config.model}: set the provider's key variable or "
            f"CLOTHO_API_KEY; nothing was sent ({detail})",
            "no_key",
        )
    if transport is None and (
        isinstance(error, exceptions.AuthenticationError | exceptions.PermissionDeniedError)
        or status in (401, 403)
    ):
        return ModelError(_refused(config, status, detail), "auth", status=status)
    if isinstance(error, exceptions.NotFoundError):
        return ModelError(
            f"model {config.model} is not known to the provider{where}: check --model ({detail})",
            "not_found",
            status=status,
        )
    if isinstance(error, exceptions.RateLimitError):
        return ModelError(
            f"the provider{where} is rate-limiting {config.model} and still refused{tries}: "
            f"wait and try again ({detail})",
            "rate_limit",
            status=status,
        )
    if isinstance(error, exceptions.Timeout) or transport == "timeout":
        return ModelError(
            f"{config.model}{where} did not answer within {config.timeout:g} s{tries}",
            "timeout",
            status=status,
        )
    if (
        isinstance(error, exceptions.APIConnectionError)
        or transport == "connection"
        or "Connection error" in str(error)
    ):
        return ModelError(
            f"cannot reach the model server{where} for {config.model}{tries} ({detail})",
            "connection",
            status=status,
        )
    if isinstance(error, exceptions.BadRequestError):
        if "LLM Provider NOT provided" in str(error):
            return ModelError(
                f"litellm does not know which provider serves {config.model!r}: name it with a "
                "prefix, such as openai/<model> for an OpenAI-compatible server",
                "config",
            )
        return ModelError(
            f"the provider{where} refused the request to {config.model} ({detail})",
            "bad_request",
            status=status,
        )
    return ModelError(
        f"the model server{where} failed for {config.model}"
        f"{' (HTTP ' + str(status) + ')' if status else ''}{tries} ({detail})",
        "server",
        status=status,
    )


def _refused(config: ModelConfig, status: int | None, detail: str) -> str:
    """What to do about a key refused (401) or not allowed the model (403)."""
    where = f" at {config.api_base}" if config.api_base else ""
    code = f" (HTTP {status})" if status else ""
    sent = config.api_key or (config.api_base and os.environ.get("OPENAI_API_KEY"))
    if config.api_base and not sent:
        return (
            f"the model server{where} wants an API key for {config.model}{code} and none was "
            f"sent: set CLOTHO_API_KEY ({detail})"
        )
    variables = _key_variables(config)
    if not variables:  # litellm refused before sending (a provider the key check skips)
        return (
            f"no API key was found for {config.model}{code}: set the provider's key "
            f"variable or CLOTHO_API_KEY ({detail})"
        )
    if status == 403:
        return (
            f"the provider{where} refused the request for {config.model}{code}: the API key "
            f"in {variables} is not allowed this model ({detail})"
        )
    return (
        f"the provider{where} refused the API key in {variables} for "
        f"{config.model}{code}: check the key ({detail})"
    )

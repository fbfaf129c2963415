"""API keys: a key missing is said before any request, naming the variable litellm reads
for the provider; a key refused (401) or not allowed the model (403) is said at once,
never retried, never reported as a server error."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator import ModelConfig, ModelError
from orchestrator.gateway import Gateway, missing_key_variables
from orchestrator.loopback import ModelServer, Reply

MESSAGES = [{"role": "user", "content": "Hello?"}]
#: The variables litellm reads the keys of the providers used here from.
KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "AZURE_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_AD_TOKEN",
    "AZURE_API_BASE",
)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def call(config: ModelConfig) -> ModelError:
    """The error of one streamed call with ``config``."""

    async def attempt() -> None:
        gateway = Gateway()
        try:
            await gateway.stream(config, MESSAGES)
        finally:
            await gateway.aclose()

    with pytest.raises(ModelError) as raised:
        asyncio.run(attempt())
    return raised.value


@pytest.mark.parametrize(
    ("model", "variables"),
    [
        ("anthropic/claude-3-5-haiku-latest", "ANTHROPIC_API_KEY"),
        ("openai/gpt-4o-mini", "OPENAI_API_KEY"),
        ("gpt-4o-mini", "OPENAI_API_KEY"),
        ("gemini/gemini-1.5-flash", "GOOGLE_API_KEY or GEMINI_API_KEY"),
    ],
)
def test_a_missing_key_is_said_before_any_request(model: str, variables: str) -> None:
    error = call(ModelConfig(model, retries=2))
    assert error.kind == "no_key"
    assert error.status is None  # no server answered
    assert str(error) == (
        f"no API key for {model}: set {variables} (read by litellm for "
        f"{model.partition('/')[0] if '/' in model else 'openai'}) or CLOTHO_API_KEY; "
        "nothing was sent"
    )


def test_nothing_reaches_the_provider_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # litellm sends a groq/ model's request to GROQ_API_BASE: here, a server that counts
    # what it receives (and answers, once a key is set)
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    with ModelServer(["Hello."]) as server:
        monkeypatch.setenv("GROQ_API_BASE", server.url)
        error = call(ModelConfig("groq/gm"))
        assert error.kind == "no_key" and "set GROQ_API_KEY" in str(error)
        assert server.requests == []
        monkeypatch.setenv("GROQ_API_KEY", "gsk-x")

        async def answered() -> str:
            gateway = Gateway()
            try:
                return (await gateway.stream(ModelConfig("groq/gm"), MESSAGES)).content
            finally:
                await gateway.aclose()

        assert asyncio.run(answered()) == "Hello."
        assert len(server.requests) == 1


def test_what_needs_no_key_check() -> None:
    given = ModelConfig("anthropic/claude-3-5-haiku-latest", api_key="sk-x")
    assert missing_key_variables(given) == ()
    # a server of the player's own may need no key; one that does answers 401 (below)
    assert missing_key_variables(ModelConfig("openai/gm", api_base="http://127.0.0.1:1/v1")) == ()
    assert missing_key_variables(ModelConfig("ollama/llama3")) == ()  # a local server
    # more than a key (cloud credentials): the provider's own error says what is missing
    assert missing_key_variables(ModelConfig("bedrock/anthropic.claude-v2")) == ()


def test_a_key_the_client_finds_missing_is_no_key_not_a_server_error() -> None:
    # Azure needs more than a key (no check before the call), and its client refuses
    # to send without one, which litellm reports as a server error (HTTP 500)
    error = call(ModelConfig("azure/gpt4", retries=2))
    assert error.kind == "no_key" and error.status is None
    assert str(error).startswith(
        "no API key for azure/gpt4: set the provider's key variable or CLOTHO_API_KEY; "
        "nothing was sent (AzureException APIError - Missing credentials."
    )


def test_the_key_found_in_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    assert missing_key_variables(ModelConfig("anthropic/claude-3-5-haiku-latest")) == ()
    monkeypatch.setenv("GEMINI_API_KEY", "g-x")
    assert missing_key_variables(ModelConfig("gemini/gemini-1.5-flash")) == ()


def test_a_refused_key_is_said_once_and_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    refused = Reply(status=401, error="Incorrect API key provided: sk-wrong")
    with ModelServer([refused, refused, refused]) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
        error = call(ModelConfig("openai/gm", api_base=server.url, retries=2))
        assert len(server.requests) == 1
    assert error.kind == "auth" and error.status == 401
    assert str(error) == (
        f"the provider at {server.url} refused the API key in OPENAI_API_KEY for openai/gm "
        "(HTTP 401): check the key (Incorrect API key provided: sk-wrong)"
    )


def test_a_key_given_to_clotho_is_named_when_refused() -> None:
    with ModelServer([Reply(status=401, error="Invalid key")]) as server:
        error = call(ModelConfig("openai/gm", api_base=server.url, api_key="sk-given"))
    assert error.kind == "auth"
    assert "refused the API key in CLOTHO_API_KEY" in str(error)


def test_a_server_that_wants_a_key_when_none_was_sent() -> None:
    with ModelServer([Reply(status=401, error="Missing bearer token")]) as server:
        error = call(ModelConfig("openai/gm", api_base=server.url))
        assert len(server.requests) == 1
    assert error.kind == "auth"
    assert str(error) == (
        f"the model server at {server.url} wants an API key for openai/gm (HTTP 401) and "
        "none was sent: set CLOTHO_API_KEY (Missing bearer token)"
    )


def test_a_model_the_key_may_not_use_is_not_retried() -> None:
    denied = Reply(status=403, error="Project does not have access to model gm")
    with ModelServer([denied, denied, denied]) as server:
        error = call(ModelConfig("openai/gm", api_base=server.url, api_key="sk-x", retries=2))
        assert len(server.requests) == 1
    assert error.kind == "auth" and error.status == 403
    assert "the API key in CLOTHO_API_KEY is not allowed this model" in str(error)
    assert "HTTP 403" in str(error) and "attempts" not in str(error)


def test_an_error_not_retried_does_not_claim_retries() -> None:
    teapot = Reply(status=418, error="I refuse")
    with ModelServer([teapot, teapot, teapot]) as server:
        error = call(ModelConfig("openai/gm", api_base=server.url, api_key="sk-x", retries=2))
        assert len(server.requests) == 1
    assert error.kind == "server"
    assert str(error) == (
        f"the model server at {server.url} failed for openai/gm (HTTP 418) (I refuse)"
    )

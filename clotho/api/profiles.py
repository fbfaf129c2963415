"""Connections: the model profiles of the server's config folder and their keys
(:mod:`clotho.profiles`), and a Test that makes one tiny call.

A key goes in (``PUT``'s ``key``) and never comes out: the answers say only whether one
is ``set`` (in the secrets file), comes ``from the environment``, or is ``not set``. The
profiles' ``ETag`` is the files' version: a write may name it in ``If-Match`` and is
refused (412, ``profiles_changed``) if the files changed since.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Response
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from starlette.concurrency import run_in_threadpool

from clotho.profiles import (
    MAX_KEY_LENGTH,
    KeyState,
    Profile,
    ProfileName,
    Profiles,
    ProfilesFileError,
)

from .deps import ContextDep, NoParameters
from .etags import entity_tags
from .problems import ApiError

__all__ = ["router"]

router = APIRouter(tags=["connections"])

#: The longest a Test waits for its answer (a profile's own timeout if shorter).
TEST_TIMEOUT_S = 20.0
#: What a Test sends: one short message, one token back.
TEST_MESSAGES = [{"role": "user", "content": "Say OK."}]


class ProfileOut(Profile):
    """A profile as the API shows it: its name and where its key comes from (never the
    key)."""

    name: str
    key: KeyState = Field(
        description="`set`: in the secrets file; `from the environment`: CLOTHO_API_KEY or "
        "the provider's variable litellm reads; `not set`."
    )


class ProfilesOut(BaseModel):
    """The profiles of the server's config folder."""

    model_config = ConfigDict(extra="forbid")

    profiles: list[ProfileOut]
    default: str | None = Field(description="The profile marked default, if one is.")
    folder: str = Field(description="The config folder (profiles.toml and secrets.toml).")
    model_from_environment: str | None = Field(
        description="CLOTHO_MODEL (or --model), if the server was given one: it comes "
        "before any profile, so the sessions' profiles are not used."
    )
    problem: str | None = Field(
        description="Why the files cannot be read (the file and the field), if they cannot: "
        "no profile is listed until the file is mended."
    )
    warnings: list[str] = Field(description="What was found wrong and repaired.")


class ProfileIn(Profile):
    """A profile to keep. ``key``: its API key, kept in the secrets file only (absent or
    null: the key kept stays); ``forget_key``: remove the key kept."""

    key: SecretStr | None = Field(
        None, min_length=1, max_length=MAX_KEY_LENGTH, description="Write-only."
    )
    forget_key: bool = False

    @field_validator("key")
    @classmethod
    def _not_blank(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None and not key.get_secret_value().strip():
            raise ValueError("a key is not only spaces (leave it out to keep the one kept)")
        return key

    def profile(self) -> Profile:
        return Profile.model_validate(self.model_dump(exclude={"key", "forget_key"}))


class ProfileTestOut(BaseModel):
    """What a Test of a profile found, in words."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    outcome: str = Field(
        description="`ok`, or the kind of failure: `no_key`, `auth` (the key refused), "
        "`not_found` (the model unknown), `connection` (the server unreachable), `timeout`, "
        "`rate_limit`, `server`, `bad_request`, `config`, `context_window`, `empty`."
    )
    message: str = Field(description="What happened, for a person.")
    model: str
    latency_ms: int | None = Field(description="How long the call took (an answer only).")
    status: int | None = Field(description="The HTTP status the model server answered with.")


Name = Annotated[ProfileName, Path(description="The profile's name.")]


def _if_match(
    if_match: Annotated[
        str | None,
        Header(
            alias="If-Match",
            description="The profiles' version (the ETag of `GET /api/profiles`): if the "
            "files changed since, the write is refused (412) and changes nothing.",
        ),
    ] = None,
) -> str | None:
    if if_match is None or if_match.strip() == "*":
        return None
    tags = entity_tags(if_match)
    if tags is None or len(tags) != 1:
        raise ApiError(
            400, "bad_if_match", f"If-Match must be one ETag of the profiles, not {if_match!r}"
        )
    weak, opaque = tags[0]
    if weak:
        raise ApiError(
            412, "weak_if_match", f'If-Match names a weak ETag; send it as given: "{opaque}"'
        )
    return opaque


IfMatch = Annotated[str | None, Depends(_if_match)]


#: The profiles' ETag as the OpenAPI document declares it.
PROFILES_ETAG = {
    "ETag": {
        "description": "The profiles' version (a hash of the files): send it back as "
        "`If-Match` to write on top of what you read.",
        "schema": {"type": "string", "pattern": '^"[0-9a-f]{16}"$'},
    }
}


def _tagged(response: Response, profiles: Profiles) -> None:
    response.headers["ETag"] = f'"{profiles.version()}"'


def _shown(profiles: Profiles, name: str, profile: Profile, environment_key: str | None) -> Any:
    state = profiles.key_state(name, profile, environment_key)
    return ProfileOut(name=name, key=state, **profile.model_dump())


@router.get(
    "/profiles",
    summary="The connection profiles",
    response_model=ProfilesOut,
    responses={200: {"headers": PROFILES_ETAG}},
)
def list_profiles(context: ContextDep, response: Response, _: NoParameters) -> Any:
    """Every profile, each with where its key comes from (never the key). A file that
    cannot be read is said in `problem` (naming the file and the field)."""
    settings = context.settings
    profiles = Profiles(settings.config_dir)
    try:
        found = profiles.all()
        shown = [_shown(profiles, name, p, settings.api_key) for name, p in found.items()]
        _tagged(response, profiles)
        problem = None
    except ProfilesFileError as error:
        found, shown, problem = {}, [], str(error)
    return ProfilesOut(
        profiles=shown,
        default=next((name for name, p in found.items() if p.default), None),
        folder=str(profiles.folder),
        model_from_environment=settings.model,
        problem=problem,
        warnings=profiles.warnings,
    )


@router.put(
    "/profiles/{name}",
    summary="Add or replace a connection profile",
    response_model=ProfileOut,
    responses={
        200: {"headers": PROFILES_ETAG},
        201: {"description": "A new profile.", "model": ProfileOut, "headers": PROFILES_ETAG},
    },
)
def put_profile(
    name: Name,
    body: ProfileIn,
    context: ContextDep,
    response: Response,
    expected: IfMatch,
) -> Any:
    """The profile as given replaces the one of that name (201 if there was none). Its
    `key` goes to the secrets file (mode 0600) and is never sent back; a profile made
    the default stops another being it."""
    profiles = Profiles(context.settings.config_dir)
    key = body.key.get_secret_value() if body.key is not None else None
    profile = body.profile()
    new = profiles.save(
        name, profile, key=key, forget_key=body.forget_key, expected_version=expected
    )
    if new:
        response.status_code = 201
    _tagged(response, profiles)
    return _shown(profiles, name, profile, context.settings.api_key)


@router.delete(
    "/profiles/{name}",
    summary="Delete a connection profile and its key",
    status_code=204,
    response_class=Response,
    responses={404: {"description": "No profile has this name. Codes: `unknown_profile`."}},
)
def delete_profile(name: Name, context: ContextDep, expected: IfMatch, _: NoParameters) -> Response:
    """Sessions that named it are told so at their next turn (`unknown_profile`) until
    another is picked."""
    Profiles(context.settings.config_dir).delete(name, expected_version=expected)
    return Response(status_code=204)


@router.post(
    "/profiles/{name}/test",
    summary="Test a connection profile with one tiny call",
    response_model=ProfileTestOut,
    responses={404: {"description": "No profile has this name. Codes: `unknown_profile`."}},
)
async def try_profile(name: Name, context: ContextDep, _: NoParameters) -> ProfileTestOut:
    """One call of one token, not retried, waiting at most 20 s: `ok` with the model and
    how long it took, or what went wrong in words (the key refused, the model unknown,
    the server unreachable, no answer in time). A failure is an answer (200), not an
    error of this route."""
    from orchestrator import Gateway, ModelError

    settings = context.settings
    profiles = Profiles(settings.config_dir)
    profile = await run_in_threadpool(profiles.get, name)
    key = await run_in_threadpool(profiles.key, name) or settings.api_key
    config = profile.config(key)
    config = replace(
        config,
        retries=0,
        timeout=min(config.timeout, TEST_TIMEOUT_S),
        params={**config.params, "max_tokens": 1},
    )
    started = time.perf_counter()
    try:
        await Gateway().complete(config, TEST_MESSAGES)
    except ModelError as error:
        return ProfileTestOut(
            ok=False,
            outcome=error.kind,
            message=_scrubbed(_failure(error, profile, key), key),
            model=profile.model,
            latency_ms=None,
            status=error.status,
        )
    took = round((time.perf_counter() - started) * 1000)
    return ProfileTestOut(
        ok=True,
        outcome="ok",
        message=f"{profile.model} answered in {took} ms",
        model=profile.model,
        latency_ms=took,
        status=200,
    )


def _failure(error: Any, profile: Profile, key: str | None) -> str:
    """A failed Test in words: what happened, then the server's own words if it said any
    (the gateway's message is written for a turn: it names CLOTHO_API_KEY and --model)."""
    where = profile.api_base or "the provider"
    said = _server_words(str(error))
    also = f" ({said})" if said else ""
    status = f" (HTTP {error.status})" if error.status else ""
    if error.kind == "auth":
        if error.status == 403:
            return f"{where} refused: the key is not allowed the model {profile.model}{also}"
        if key is None:
            return f"{where} wants an API key and none was sent: give one in the profile{also}"
        return f"{where} refused the key{status}: check it{also}"
    if error.kind == "no_key":
        return f"no API key for {profile.model}: give one in the profile (nothing was sent)"
    if error.kind == "not_found":
        return f"{where} does not know the model {profile.model}{also}"
    if error.kind == "connection":
        return f"cannot reach {where}{also}"
    if error.kind == "timeout":
        return f"{where} did not answer within {min(profile.timeout, TEST_TIMEOUT_S):g} s"
    return str(error)


def _server_words(message: str) -> str:
    """The last parenthesised part of a gateway's message: what the server said."""
    if not message.endswith(")"):
        return ""
    depth = 0
    for index in range(len(message) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(message[index], 0)
        if depth == 0:
            inner = message[index + 1 : -1]
            return "" if inner.startswith("HTTP ") else inner
    return ""


def _scrubbed(text: str, key: str | None) -> str:
    """``text`` without the key in it (a server may quote what it was sent)."""
    if key and len(key) >= 4:
        text = text.replace(key, "[key]")
    return text

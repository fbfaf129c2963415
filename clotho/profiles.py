"""Connections: the player's model profiles and their API keys, in two files of the
user's config folder (``Settings.config_dir``), never in the database.

- ``profiles.toml``: one table per profile (``[profiles."Local llama"]``): the litellm
  model string, the server's base URL, the context window, the sampler settings
  (``[profiles.NAME.params]``, sent as they are), the tokens kept for the reply, the
  timeout, the player's own label for the settings (``preset``), and whether it is the
  default. Read with :mod:`tomllib`, written whole with ``tomli_w``.
- ``secrets.toml``: the keys, by profile name (``[keys]``), mode 0600. A file others can
  read is made private again, with a warning (:attr:`Profiles.warnings`).

Every write takes a lock on the folder (``.lock``, for the processes of one server),
writes a temporary file beside the old one and moves it into place (``os.replace``): a
reader sees the old file or the new one, never half of one. A file that cannot be read is
a :class:`ProfilesFileError` naming the file and the field.

Which profile a session's turns use: :func:`chosen_profile` (the precedence is written
there and in docs/connections.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import tomli_w
from filelock import FileLock
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from clotho.errors import ClothoError
from orchestrator.config import ModelConfig, ModelSettings

__all__ = [
    "PROFILES_FILE",
    "SECRETS_FILE",
    "ChosenProfile",
    "KeyState",
    "Profile",
    "ProfileName",
    "Profiles",
    "ProfilesChangedError",
    "ProfilesFileError",
    "Sampler",
    "UnknownProfileError",
    "chosen_profile",
]

log = logging.getLogger(__name__)

PROFILES_FILE = "profiles.toml"
SECRETS_FILE = "secrets.toml"
_LOCK_FILE = ".lock"

#: The most profiles a file may hold.
MAX_PROFILES = 200
#: The longest key accepted (provider keys are well under it).
MAX_KEY_LENGTH = 4096

#: Where a profile's key comes from, as the API says it (the key itself never leaves
#: the secrets file).
KeyState = Literal["set", "not set", "from the environment"]


def _no_controls(text: str) -> str:
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise ValueError("must not hold control characters (tabs, new lines...)")
    return text


ProfileName = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=100),
    AfterValidator(_no_controls),
]
"""A profile's name: what a session's ``settings.profile`` names (1 to 100 characters,
no control characters)."""

Label = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=100), AfterValidator(_no_controls)
]


def _base_url(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    if not value.startswith(("http://", "https://")) or len(value) < 10:
        raise ValueError("must be an http:// or https:// address, such as http://127.0.0.1:8080/v1")
    return _no_controls(value)


class Sampler(BaseModel):
    """Sampler settings, sent to the model as they are (``ModelSettings.params``); the
    common ones checked here, any other a provider takes given beside them."""

    model_config = ConfigDict(extra="allow")

    __pydantic_extra__: dict[str, float | int | str | bool | list[str]] = Field(init=False)

    temperature: float | None = Field(None, ge=0, le=5, allow_inf_nan=False)
    top_p: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    max_tokens: int | None = Field(None, gt=0, le=1_000_000)
    frequency_penalty: float | None = Field(None, ge=-2, le=2, allow_inf_nan=False)
    presence_penalty: float | None = Field(None, ge=-2, le=2, allow_inf_nan=False)
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    stop: list[Annotated[str, StringConstraints(min_length=1, max_length=100)]] | None = Field(
        None, max_length=4
    )

    @model_validator(mode="after")
    def _few_extras(self) -> Sampler:
        extra = self.__pydantic_extra__ or {}
        if len(extra) > 16:
            raise ValueError(f"at most 16 other settings, not {len(extra)}")
        for name in extra:
            if not name.isidentifier() or len(name) > 64:
                raise ValueError(f"{name!r} is not a setting's name (letters, digits, _)")
        return self

    def params(self) -> dict[str, Any]:
        """What is sent: the settings given, none of those left unset."""
        return self.model_dump(exclude_none=True)


_DEFAULT_SETTINGS = ModelSettings()


class Profile(BaseModel):
    """One way to reach a model: which, where, and how it is called."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^\S+$")] = (
        Field(description="A litellm model string: openai/gpt-4o-mini, ollama/llama3...")
    )
    api_base: Annotated[str | None, AfterValidator(_base_url)] = Field(
        None, max_length=2000, description="The server's base URL (a local or a proxy server)."
    )
    preset: Label | None = Field(None, description="The player's own name for these settings.")
    context_window: int | None = Field(
        None, gt=0, le=100_000_000, description="Tokens the model takes (default: litellm's list)."
    )
    reply_tokens: int = Field(
        _DEFAULT_SETTINGS.reply_tokens,
        gt=0,
        le=1_000_000,
        description="Tokens kept free for the reply when the history is trimmed.",
    )
    timeout: float = Field(
        _DEFAULT_SETTINGS.timeout,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Seconds to wait for an answer (or between two pieces of a stream).",
    )
    retries: int = Field(
        _DEFAULT_SETTINGS.retries,
        ge=0,
        le=10,
        description="Retries after a rate limit, a server error or a timeout.",
    )
    params: Sampler = Field(default_factory=Sampler, description="Sampler settings.")
    default: bool = Field(
        False,
        description="Used by sessions that name no profile and whose campaign names no model.",
    )

    def settings(self) -> ModelSettings:
        """How the calls are made (:class:`ModelSettings`)."""
        return ModelSettings(
            params=self.params.params(),
            timeout=float(self.timeout),
            retries=self.retries,
            context_window=self.context_window,
            reply_tokens=self.reply_tokens,
        )

    def config(self, api_key: str | None = None) -> ModelConfig:
        """The model and how to call it, with ``api_key`` (``None``: the environment's)."""
        return self.settings().config(self.model, api_base=self.api_base, api_key=api_key)


class _ProfilesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profiles: dict[ProfileName, Profile] = Field(default_factory=dict, max_length=MAX_PROFILES)

    @model_validator(mode="after")
    def _one_default(self) -> _ProfilesFile:
        defaults = [name for name, profile in self.profiles.items() if profile.default]
        if len(defaults) > 1:
            raise ValueError(f"only one profile may be the default, not {', '.join(defaults)}")
        return self


Key = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_KEY_LENGTH)
]


class _SecretsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keys: dict[ProfileName, Key] = Field(default_factory=dict, max_length=MAX_PROFILES)


class ProfilesError(ClothoError):
    """Base of the errors of the connection profiles."""

    code = "profiles_error"


class ProfilesFileError(ProfilesError, ValueError):
    """A file of the config folder (profiles.toml, secrets.toml) cannot be read or
    written: the message names the file and the field."""

    code = "bad_config_file"


class UnknownProfileError(ProfilesError, LookupError):
    """No connection profile has this name."""

    code = "unknown_profile"

    def __init__(self, name: str, folder: Path) -> None:
        super().__init__(
            f"no connection profile is named {name!r} (in {folder / PROFILES_FILE}): "
            "pick another in Connections"
        )
        self.name = name


class ProfilesChangedError(ProfilesError):
    """The profiles changed since the version a write names (``If-Match``): nothing was
    written."""

    code = "profiles_changed"

    def __init__(self, expected: str, current: str) -> None:
        super().__init__(
            f"the profiles changed since version {expected} (they are at {current} now): "
            "read them again, then write"
        )
        self.expected = expected
        self.current = current


@dataclass(frozen=True)
class _Read:
    profiles: dict[str, Profile]
    keys: dict[str, str]
    version: str


class Profiles:
    """The profiles and keys of one config folder. Each call reads the files as they
    are now (a hand edit is seen at once); each write is whole, under the folder's lock.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.warnings: list[str] = []
        """What was found wrong and repaired (a secrets file others could read)."""

    @property
    def profiles_path(self) -> Path:
        return self.folder / PROFILES_FILE

    @property
    def secrets_path(self) -> Path:
        return self.folder / SECRETS_FILE

    # -- reads ------------------------------------------------------------------------

    def all(self) -> dict[str, Profile]:
        """Every profile, by name, in the file's order.

        Raises:
            ProfilesFileError: profiles.toml cannot be read.
        """
        return self._profiles()[0]

    def get(self, name: str) -> Profile:
        """The profile named ``name``.

        Raises:
            UnknownProfileError: there is none.
            ProfilesFileError: profiles.toml cannot be read.
        """
        found = self.all().get(name)
        if found is None:
            raise UnknownProfileError(name, self.folder)
        return found

    def default(self) -> tuple[str, Profile] | None:
        """The profile marked default, if one is."""
        for name, profile in self.all().items():
            if profile.default:
                return name, profile
        return None

    def key(self, name: str) -> str | None:
        """The key kept for profile ``name`` (``None``: none in the secrets file).

        Raises:
            ProfilesFileError: secrets.toml cannot be read.
        """
        return self._keys().get(name)

    def key_state(self, name: str, profile: Profile, environment_key: str | None) -> KeyState:
        """Where the key of profile ``name`` would come from: the secrets file (``set``),
        ``CLOTHO_API_KEY`` (``environment_key``) or litellm's variables for its provider
        (``from the environment``), or nowhere (``not set``). Never the key itself."""
        if name in self._keys():
            return "set"
        if environment_key or _provider_key_in_environment(profile.model):
            return "from the environment"
        return "not set"

    def version(self) -> str:
        """What the files hold now, as a short tag (an ``ETag``): it changes with every
        write, a hand edit too (the keys count by name only)."""
        return self._read().version

    def stamp(self) -> tuple[tuple[int, int, int], ...]:
        """The files' identity now (inode, size, change time), cheap to take: whatever
        writes them changes it, so an engine built for one stamp is rebuilt after."""
        found = []
        for path in (self.profiles_path, self.secrets_path):
            try:
                info = path.stat()
            except FileNotFoundError:
                found.append((0, -1, 0))
            else:
                found.append((info.st_ino, info.st_size, info.st_mtime_ns))
        return tuple(found)

    # -- writes -----------------------------------------------------------------------

    def save(
        self,
        name: str,
        profile: Profile,
        *,
        key: str | None = None,
        forget_key: bool = False,
        expected_version: str | None = None,
    ) -> bool:
        """Add or replace profile ``name``; ``key``: its new key (to the secrets file
        only), ``forget_key``: remove the one kept. A profile made the default stops
        another being it. Whether the profile is new.

        Raises:
            ProfilesChangedError: the files are not at ``expected_version`` (nothing written).
            ProfilesFileError: a file cannot be read or written.
        """
        with self._locked():
            profiles, keys = self._checked(expected_version)
            new = name not in profiles
            if profile.default:
                profiles = {
                    other: kept.model_copy(update={"default": False}) if kept.default else kept
                    for other, kept in profiles.items()
                }
            profiles[name] = profile
            if len(profiles) > MAX_PROFILES:
                raise ProfilesFileError(
                    f"{self.profiles_path}: it holds {MAX_PROFILES} profiles, the most it may: "
                    "delete one first"
                )
            if key is not None:
                key = key.strip()
                if not key or len(key) > MAX_KEY_LENGTH:
                    raise ValueError(f"a key is 1 to {MAX_KEY_LENGTH} characters")
                keys[name] = key
            elif forget_key:
                keys.pop(name, None)
            self._write(profiles, keys)
            return new

    def delete(self, name: str, *, expected_version: str | None = None) -> None:
        """Remove profile ``name`` and its key.

        Raises:
            UnknownProfileError: there is none.
            ProfilesChangedError: the files are not at ``expected_version``.
        """
        with self._locked():
            profiles, keys = self._checked(expected_version)
            if name not in profiles:
                raise UnknownProfileError(name, self.folder)
            del profiles[name]
            keys.pop(name, None)
            self._write(profiles, keys)

    # -- the files --------------------------------------------------------------------

    def _locked(self) -> FileLock:
        self._folder()
        return FileLock(self.folder / _LOCK_FILE, timeout=10)

    def _folder(self) -> None:
        self.folder.mkdir(parents=True, mode=0o700, exist_ok=True)

    def _checked(self, expected: str | None) -> tuple[dict[str, Profile], dict[str, str]]:
        read = self._read()
        if expected is not None and expected != read.version:
            raise ProfilesChangedError(expected, read.version)
        return dict(read.profiles), dict(read.keys)

    def _read(self) -> _Read:
        profiles, raw = self._profiles()
        keys = self._keys()
        digest = hashlib.sha256(raw)
        for name in sorted(keys):
            digest.update(b"\0key\0" + name.encode())
        return _Read(profiles, keys, digest.hexdigest()[:16])

    def _profiles(self) -> tuple[dict[str, Profile], bytes]:
        raw, document = _load(self.profiles_path)
        try:
            return _ProfilesFile.model_validate(document).profiles, raw
        except ValidationError as error:
            raise ProfilesFileError(_invalid(self.profiles_path, error)) from None

    def _keys(self) -> dict[str, str]:
        path = self.secrets_path
        self._private(path)
        _raw, document = _load(path)
        try:
            return _SecretsFile.model_validate(document).keys
        except ValidationError as error:
            # the values are keys: the message names the fields, never what they hold
            raise ProfilesFileError(_invalid(path, error, values=False)) from None

    def _private(self, path: Path) -> None:
        """A secrets file others can read is made the owner's alone (0600), with a warning."""
        if os.name != "posix":
            return
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            return
        if mode & 0o077:
            try:
                path.chmod(0o600)
            except OSError as error:
                raise ProfilesFileError(
                    f"{path} can be read by others (mode {mode:04o}) and cannot be made "
                    f"private ({error.strerror}): chmod 600 it"
                ) from None
            warning = (
                f"{path} could be read by others (mode {mode:04o}): it was made private "
                "(0600); the keys in it may have been seen"
            )
            log.warning("%s", warning)
            self.warnings.append(warning)

    def _write(self, profiles: Mapping[str, Profile], keys: Mapping[str, str]) -> None:
        document = {
            "profiles": {
                name: profile.model_dump(mode="json", exclude_none=True)
                for name, profile in profiles.items()
            }
        }
        for written in document["profiles"].values():
            if not written["params"]:
                del written["params"]
        header = "# Clotho's connection profiles (keys are in secrets.toml, never here).\n"
        _replace(self.profiles_path, header + tomli_w.dumps(document), 0o644)
        secrets = "# Clotho's API keys, by profile name: keep this file private (0600).\n"
        _replace(self.secrets_path, secrets + tomli_w.dumps({"keys": dict(keys)}), 0o600)


def _load(path: Path) -> tuple[bytes, dict[str, Any]]:
    """A TOML file's bytes and document (nothing, if there is no file)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return b"", {}
    except OSError as error:
        raise ProfilesFileError(f"{path}: cannot be read ({error.strerror})") from None
    if len(raw) > 1_000_000:
        raise ProfilesFileError(f"{path}: {len(raw)} bytes, more than the 1,000,000 allowed")
    try:
        return raw, tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ProfilesFileError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except tomllib.TOMLDecodeError as error:
        raise ProfilesFileError(f"{path}: not TOML: {error}") from None


def _invalid(path: Path, error: ValidationError, *, values: bool = True) -> str:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "the file"
        text = item["msg"]
        if values and item["type"] not in ("missing", "extra_forbidden") and "input" in item:
            shown = repr(item["input"])
            text += f" (it is {shown[:60]})"
        problems.append(f"{where}: {text}")
    return f"{path}: " + "; ".join(problems)


def _replace(path: Path, text: str, mode: int) -> None:
    """Write ``path`` whole: a temporary file beside it (created with ``mode``, so a key
    is never readable by others, not even for a moment), flushed, then moved in place."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            if os.name == "posix":
                os.fchmod(out.fileno(), mode)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise ProfilesFileError(f"{path}: cannot be written ({error.strerror})") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _provider_key_in_environment(model: str) -> bool:
    """Whether the environment holds a key litellm reads for ``model``'s provider (its
    ``validate_environment``: ``OPENAI_API_KEY`` for ``openai/...``)."""
    from orchestrator.gateway import litellm_module

    found = litellm_module().validate_environment(model)
    return bool(found.get("keys_in_environment"))


@dataclass(frozen=True)
class ChosenProfile:
    """The profile a session's turns use, and the key they send."""

    name: str
    profile: Profile
    key: str | None
    """Its key from the secrets file, else ``CLOTHO_API_KEY``; ``None``: litellm's
    variables for the provider."""
    key_source: str = "CLOTHO_API_KEY"
    """Where the key came from, as an error says it."""

    def config(self) -> ModelConfig:
        return replace(self.profile.config(self.key), key_source=self.key_source)


def chosen_profile(
    folder: Path,
    session_profile: str | None,
    *,
    explicit_model: bool,
    campaign_model: bool,
    environment_key: str | None = None,
) -> ChosenProfile | None:
    """The profile whose model a session's turns use, by precedence: a model given
    explicitly (``CLOTHO_MODEL``, ``--model``: ``explicit_model``) comes first and uses
    no profile; then the session's profile (``settings.profile``); then the campaign's
    ``[model]`` (``campaign_model``: it names one), no profile; then the profile marked
    default; else none.

    Raises:
        UnknownProfileError: the session names a profile that is gone.
        ProfilesFileError: a file cannot be read.
    """
    if explicit_model:
        return None
    profiles = Profiles(folder)
    if session_profile:
        name, profile = session_profile, profiles.get(session_profile)
    elif campaign_model:
        return None
    else:
        found = profiles.default()
        if found is None:
            return None
        name, profile = found
    kept = profiles.key(name)
    if kept:
        source = f"{profiles.secrets_path} (profile {name!r})"
        return ChosenProfile(name, profile, kept, source)
    return ChosenProfile(name, profile, environment_key)

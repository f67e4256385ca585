"""`--model ORG/NAME`: a model's config.json from the Hugging Face Hub, and nothing else.

Only config.json is fetched (never weights), through huggingface_hub, so its cache, HF_HOME,
HF_HUB_OFFLINE and HF_TOKEN (gated and private models) behave as in every Hugging Face tool: a cached
config is read without the network. huggingface_hub is an optional extra (`zeroplan[hub]`), imported
only when an id is given.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

from zeroplan.core.errors import InputError, ref

# org/name as the Hub spells repository ids (letters, digits, '-', '_', '.'; no '--' or '..').
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_REVISION = re.compile(r"[A-Za-z0-9._/-]{1,200}")


def looks_like_hub_id(text: str) -> bool:
    """ORG/NAME[@REVISION] that is not a local path (a file or folder here wins, as in transformers)."""
    repo_id = text.split("@", 1)[0]
    return (bool(_HUB_ID.fullmatch(repo_id)) and "--" not in repo_id and ".." not in repo_id
            and not repo_id.endswith(".json") and not Path(text).exists())


# How long the reachability check waits for the Hub's host before calling it unreachable.
PROBE_SECONDS = 3.0
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def offline_mode() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it (1, true, yes, on)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_unreachable() -> str | None:
    """Why the Hub's host cannot be reached (None when it can, or when a proxy decides: then huggingface_hub
    tries). One TCP connection with a short timeout, where huggingface_hub would retry with back-off for
    about 25 seconds, printing a warning each time."""
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return None
    from huggingface_hub import constants

    endpoint = urlsplit(constants.ENDPOINT)
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
    except OSError as error:
        return f"{host}: {error.strerror or error}"
    return None


def _cached_config(repo_id: str, revision: str | None) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return Path(found) if isinstance(found, str) else None


@contextlib.contextmanager
def _quiet_hub():
    """huggingface_hub's retry warnings off while config.json is fetched (an error becomes zeroplan's one line)."""
    from huggingface_hub.utils import logging as hub_logging

    previous = hub_logging.get_verbosity()
    hub_logging.set_verbosity_error()
    try:
        yield
    finally:
        hub_logging.set_verbosity(previous)


def fetch_config(model_id: str) -> Path:
    """The local path of ORG/NAME's config.json (from the cache, or downloaded into it)."""
    repo_id, _, revision = model_id.partition("@")
    if revision and not _REVISION.fullmatch(revision):
        raise InputError("model", f"'{revision}' is not a revision (a branch, tag or commit)",
                         f"write {repo_id}@main or a commit hash")
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub import errors as hub_errors
    except ImportError:
        raise InputError("model", f"'{model_id}' is a Hugging Face Hub id, and reading one needs huggingface_hub",
                         'pip install "zeroplan[hub]", or give the path of a local config.json') from None
    unreachable = None if offline_mode() else hub_unreachable()
    if unreachable is not None:  # no retries with back-off (25 s of warnings): the cache, or one line now
        cached = _cached_config(repo_id, revision or None)
        if cached is not None:
            return cached
        raise InputError("model", f"{repo_id}'s config.json is not in the local Hugging Face cache and the Hub "
                         f"cannot be reached ({unreachable})",
                         f"run once with network access (`hf download {repo_id} config.json`), give the path of a "
                         "local config.json, or set HF_HUB_OFFLINE=1 to use only the cache without trying the "
                         "network")
    try:
        with _quiet_hub():
            return Path(hf_hub_download(repo_id, "config.json", revision=revision or None))
    except hub_errors.GatedRepoError:
        raise InputError("model", f"{repo_id} is gated and this token has no access to it",
                         f"accept its licence on https://huggingface.co/{repo_id} and set HF_TOKEN "
                         "(or run `hf auth login`)") from None
    except hub_errors.RepositoryNotFoundError:
        raise InputError("model", f"no model '{repo_id}' on the Hugging Face Hub (or it is private)",
                         "check the id, set HF_TOKEN for a private model, or give a preset "
                         "(`zeroplan presets list`) or a local config.json") from None
    except hub_errors.RevisionNotFoundError:
        raise InputError("model", f"{repo_id} has no revision '{revision}'", "use a branch, tag or commit it has") \
            from None
    except (hub_errors.LocalEntryNotFoundError, hub_errors.OfflineModeIsEnabled):
        raise InputError("model", f"{repo_id}'s config.json is not in the local Hugging Face cache and the Hub "
                         "cannot be reached (HF_HUB_OFFLINE=1, or the network is down)",
                         f"run once with network access (`hf download {repo_id} config.json`), "
                         "or give the path of a local config.json") from None
    except hub_errors.EntryNotFoundError:
        raise InputError("model", f"{repo_id} has no config.json (not a transformers model?)",
                         f"give the path of a config.json, or {ref('params')} with the count") from None
    except (hub_errors.HfHubHTTPError, OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError("model", f"{repo_id}'s config.json could not be fetched: {first_line}",
                         "check the network and HF_TOKEN, or give the path of a local config.json") from None

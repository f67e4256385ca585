"""`--model ORG/NAME`: a model's config.json from the Hugging Face Hub, and nothing else.

Only config.json is fetched (never weights), through huggingface_hub, so its cache, HF_HOME,
HF_HUB_OFFLINE and HF_TOKEN (gated and private models) behave as in every Hugging Face tool: a cached
config is read without the network. huggingface_hub is an optional extra (`zeroplan[hub]`), imported
only when an id is given.
"""

from __future__ import annotations

import re
from pathlib import Path

from zeroplan.core.errors import InputError, ref

# org/name as the Hub spells repository ids (letters, digits, '-', '_', '.'; no '--' or '..').
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_REVISION = re.compile(r"[A-Za-z0-9._/-]{1,200}")


def looks_like_hub_id(text: str) -> bool:
    """ORG/NAME[@REVISION] that is not a local path (a file or folder here wins, as in transformers)."""
    repo_id = text.split("@", 1)[0]
    return (bool(_HUB_ID.fullmatch(repo_id)) and "--" not in repo_id and ".." not in repo_id
            and not repo_id.endswith(".json") and not Path(text).exists())


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
    try:
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
                         "cannot be reached (offline, or HF_HUB_OFFLINE=1)",
                         f"run once with network access (`hf download {repo_id} config.json`), "
                         "or give the path of a local config.json") from None
    except hub_errors.EntryNotFoundError:
        raise InputError("model", f"{repo_id} has no config.json (not a transformers model?)",
                         f"give the path of a config.json, or {ref('params')} with the count") from None
    except (hub_errors.HfHubHTTPError, OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError("model", f"{repo_id}'s config.json could not be fetched: {first_line}",
                         "check the network and HF_TOKEN, or give the path of a local config.json") from None

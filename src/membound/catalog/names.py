"""Names from the outside world: one resolver for models, devices, runtimes and dtypes.

A name resolves, in this order:
1. exactly, as the bundled or registered name (`h100-sxm`, `llama-3.1-8b`);
2. after normalisation: case, spaces, hyphens, underscores and dots do not matter
   (`H100 SXM`, `llama3.1-8b`, `Q4_K_M`), nor does a trailing org of a Hugging Face id
   when the part after the last `/` is itself a known name (`meta-llama/Llama-3.1-8B`);
3. through the `aliases:` a profile or preset carries (vendor spellings such as
   "NVIDIA H200 SXM 141GB", marketing names, Hugging Face ids such as
   "meta-llama/Llama-3.3-70B-Instruct"), also compared after normalisation; a model's HF-id alias
   also answers to its part after the '/' ("DeepSeek-R1-Distill-Llama-8B") unless two entries share it;
4. as 2 and 3 once leading vendor words (NVIDIA, GeForce, AMD, Instinct, Radeon, Intel, Apple,
   Meta) and a trailing memory size ("80GB", "141GB HBM3e") are dropped: "NVIDIA H100 SXM" is
   "H100 SXM". A name this leaves ambiguous ("NVIDIA H100": SXM, PCIe or NVL) still misses, and so
   does a memory size that is not the device's ("RTX 3080 12GB" is not the 10 GB card's profile);
5. for models, as 2 to 4 once trailing variant words are dropped: a fine-tune keeps its base's
   architecture ("Llama-3.1-8B-Instruct", "gemma-3-27b-it", "Llama-2-7b-chat-hf",
   "Mistral-7B-Instruct-v0.3", "Qwen3-30B-A3B-Instruct-2507" are their base presets). A quantized
   upload ("-AWQ", "-GGUF") is not its base: its weights are another format (the reference loader,
   whose rows state the format apart, reads it as the base: `reference.QUANTIZED_UPLOAD`).

Normalisation is only used where it is safe: when two different names (or aliases) of one kind
normalise to the same key, that key resolves to neither (the exact names still do), and an
alias that collides with another entry's name or alias is a ProfileError naming both files.

A miss raises UnknownNameError with the nearest names (difflib), on one line:
    unknown hardware 'h100': did you mean 'h100-sxm', 'h100-nvl' or 'h100-pcie'? (...)

    import membound as mb
    mb.resolve_name("hardware", "NVIDIA H100 80GB HBM3")   # -> 'h100-sxm'
    mb.suggest_names("model", "lama-3-8")                  # -> ['llama-3-8b', ...]
"""
from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidInputError, ProfileError, UnknownNameError

_DROP = re.compile(r"[\s\-_.]+")
_VENDOR = re.compile(r"^(?:(?:nvidia|geforce|amd|instinct|radeon|intel|apple|meta)[\s\-_]+)+", re.IGNORECASE)
_VARIANT = re.compile(r"[\s\-_.]+(?:instruct|chat|it|base|hf|v\d+(?:\.\d+)*|\d{4})$", re.IGNORECASE)
_MEMORY = re.compile(r"[\s\-_]+(\d+)\s*gb(?:[\s\-_]*(?:hbm|gddr|lpddr)\w*)?$", re.IGNORECASE)
KINDS = ("model", "hardware", "runtime", "dtype")


def names_a_path(text: str, suffixes: tuple[str, ...]) -> bool:
    """Whether a loader should read `text` as a file path (a known suffix, or an existing file or
    folder) rather than resolve it as a name; a string no file system accepts (too long, a NUL)
    is a name, so it reaches the resolver and its one-line error."""
    if text.endswith(suffixes):
        return True
    if not text.strip():                  # "" would be the current folder
        return False
    try:
        p = Path(text)
        return p.is_file() or (".json" in suffixes and p.is_dir())
    except (OSError, ValueError):
        return False


def normalise(text: str) -> str:
    """The comparison key of a name: lower case, without spaces, '-', '_' or '.'."""
    return _DROP.sub("", text.strip().lower())


@dataclass(frozen=True)
class Entry:
    """One resolvable thing: its canonical name, its aliases, and the file it came from."""

    name: str
    aliases: tuple[str, ...] = ()
    source: str = ""
    memory_bytes: float | None = None   # a device's physical memory: what a memory size in a name must match


def _repo_names(entries: list[Entry], keys: dict[str, str]) -> dict[str, str]:
    """A model's alias that is a Hugging Face id ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B") also answers
    to its part after the '/' ("DeepSeek-R1-Distill-Llama-8B"), the way benchmark tables write it,
    unless that is already a name or alias, or two entries' ids would share it (then neither)."""
    out: dict[str, str] = {}
    clash: set[str] = set()
    for e in entries:
        for alias in e.aliases:
            if "/" not in alias:
                continue
            k = normalise(alias.rsplit("/", 1)[1])
            if not k or k in keys:
                continue
            if out.setdefault(k, e.name) != e.name:
                clash.add(k)
    return {k: v for k, v in out.items() if k not in clash}


@dataclass(frozen=True)
class NameIndex:
    """The names of one kind, ready to resolve and to suggest from."""

    kind: str
    names: frozenset[str]
    keys: dict[str, str] = field(default_factory=dict)           # normalised key -> canonical name
    ambiguous: dict[str, tuple[str, ...]] = field(default_factory=dict)   # key -> clashing names
    repo_names: dict[str, str] = field(default_factory=dict)     # key of an alias's part after '/' -> name
    memory: dict[str, float] = field(default_factory=dict)       # name -> physical memory bytes (devices)

    @classmethod
    def build(cls, kind: str, entries: Iterable[Entry]) -> NameIndex:
        """Index `entries`; an alias shared by two entries is a ProfileError."""
        entries = list(entries)
        owner: dict[str, Entry] = {}              # key -> entry, for the collision message
        keys: dict[str, str] = {}
        ambiguous: dict[str, set[str]] = {}
        names = frozenset(e.name for e in entries)
        for e in entries:                          # names first: they win over aliases
            k = normalise(e.name)
            if k in keys and keys[k] != e.name:
                ambiguous.setdefault(k, {keys[k]}).add(e.name)
            keys.setdefault(k, e.name)
            owner.setdefault(k, e)
        for e in entries:
            for alias in e.aliases:
                k = normalise(alias)
                if not k:
                    raise ProfileError(e.source or e.name, "aliases", f"value {alias!r}: expected a non-empty name")
                other = keys.get(k)
                if other is not None and other != e.name:
                    where = owner[k].source or owner[k].name
                    raise ProfileError(e.source or e.name, "aliases",
                                       f"value {alias!r} is also a name or alias of {other!r} ({where})")
                keys[k] = e.name
                owner.setdefault(k, e)
        for k in ambiguous:
            keys.pop(k, None)
        return cls(kind, names, keys, {k: tuple(sorted(v)) for k, v in ambiguous.items()},
                   _repo_names(entries, keys) if kind == "model" else {},
                   {e.name: e.memory_bytes for e in entries if e.memory_bytes})

    def lookup(self, text: str) -> str | None:
        """The canonical name `text` stands for, or None."""
        if text in self.names:
            return text
        hit = self._get(normalise(text))
        if hit is None and "/" in text:           # an HF id whose last part is a known name
            hit = self._get(normalise(text.rsplit("/", 1)[1]))
        if hit is None and len(text) <= 200:      # a vendor's spelling: "NVIDIA A100 80GB", "NVIDIA H100 SXM5 80GB"
            # (no name is longer: the trailing-memory pattern backtracks quadratically on long runs of spaces)
            unbranded = _VENDOR.sub("", text.strip())
            hit = self._get(normalise(unbranded)) or self._sized(unbranded)
            bare = unbranded.rsplit("/", 1)[-1]      # an HF id's repository name
            while hit is None and self.kind == "model" and _VARIANT.search(bare):
                bare = _VARIANT.sub("", bare)            # "Llama-2-7b-chat-hf" -> "Llama-2-7b"
                hit = self._get(normalise(bare))
        return hit

    def _sized(self, text: str) -> str | None:
        """The device `text` names once its trailing memory size is dropped, if that size is the
        device's (within 8%: GB against GiB): "RTX 3080 12GB" is not the 10 GB card's profile."""
        m = _MEMORY.search(text)
        if m is None:
            return None
        hit = self._get(normalise(text[:m.start()]))
        if hit is None or hit not in self.memory:
            return hit
        stated = float(m.group(1)) * 1e9                      # "80GB" -> 8e10 bytes
        return hit if abs(stated - self.memory[hit]) <= 0.08 * self.memory[hit] else None

    def _get(self, key: str) -> str | None:
        """A name or alias by its key, else an HF-id alias by its part after the '/'."""
        return self.keys.get(key) or self.repo_names.get(key)

    def suggest(self, text: str, n: int = 3) -> list[str]:
        """Up to `n` canonical names nearest to `text`: names the query starts or is contained
        in first, then difflib's closest, each canonical name once."""
        q = normalise(text)
        if not q or len(q) > 200:                  # no name is that long; difflib is quadratic
            return []
        scored = []
        for k, name in [*self.keys.items(), *((k, v) for k, vs in self.ambiguous.items() for v in vs)]:
            ratio = difflib.SequenceMatcher(None, q, k).ratio()
            contains = q in k or (len(k) >= 3 and k in q)
            if contains or ratio >= 0.6:
                scored.append((not contains, -ratio, len(name), name))
        out: list[str] = []
        for *_, name in sorted(scored):
            if name not in out:
                out.append(name)
        return out[:n]

    def resolve(self, text: str) -> str:
        """The canonical name, or UnknownNameError with the nearest names."""
        hit = self.lookup(text)
        if hit is not None:
            return hit
        k = normalise(text)
        if k in self.ambiguous:
            raise UnknownNameError(self.kind, text, self.names, list(self.ambiguous[k]))
        raise UnknownNameError(self.kind, text, self.names, self.suggest(text))


# ---- one registry of indexes, filled by the loaders (arrows point from loaders to here) ----
_providers: dict[str, Callable[[], NameIndex]] = {}
_lock = threading.Lock()


def register_kind(kind: str, provider: Callable[[], NameIndex]) -> None:
    """Called by a loader module: `provider()` returns the current index of its names."""
    with _lock:
        _providers[kind] = provider


def index(kind: str) -> NameIndex:
    """The current index of one kind ("model", "hardware", "runtime" or "dtype")."""
    if kind not in KINDS:
        raise InvalidInputError("kind", kind, f"one of {list(KINDS)}")
    return _providers[kind]()   # each loader registers its kind when membound.catalog is imported


def resolve_name(kind: str, text: str) -> str:
    """The bundled/registered name `text` stands for; UnknownNameError with a did-you-mean."""
    if not isinstance(text, str):
        raise InvalidInputError(kind, text, f"a {kind} name")
    return index(kind).resolve(text)


def suggest_names(kind: str, text: str, n: int = 3) -> list[str]:
    """Up to `n` known names of `kind` nearest to `text` (for a did-you-mean)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:        # 1e-300 was a TypeError of slicing
        raise InvalidInputError("n", n, "an integer >= 0 (names to suggest)")
    return index(kind).suggest(str(text), n)

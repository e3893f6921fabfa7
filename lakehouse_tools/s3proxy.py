"""S3Proxy as the project runs it: the pinned release (``jars.toml``) with one fix of its own
source compiled in front of it, until a release carries the fix.

S3Proxy 4.0.0's file-system store lists a folder by reading its entries, then each entry's
attributes. Every write puts a temporary file beside its object and removes it; when one is removed
between the two reads, the listing stops there and silently drops the entries after it
(``AbstractNio2BlobStore.listHelper``). A Delta log listed while another writer commits then shows
a gap (versions 1 and 5, not 2 to 4), which delta-rs refuses. Upstream fixed it in gaul/s3proxy
8732326a ("Tolerate entries vanishing during nio2 enumeration"); the same change, for the listing
alone, is applied here to the release's own source, fetched from Maven Central and checked
against the pinned SHA-256, and compiled with the JDK's ``javac`` by ``lakehouse jars``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import tomllib
import urllib.request
import zipfile
from pathlib import Path

from lakehouse_tools.jars import IVY_CACHE, MAVEN_CENTRAL, MIRROR_VARIABLE, PINS, S3PROXY_JARS_DIR
from lakehouse_tools.java_classes import compile_jar

FIX_JAR = S3PROXY_JARS_DIR.with_name("s3proxy-fix") / "s3proxy-listing-fix.jar"
MAIN_CLASS = "org.gaul.s3proxy.Main"
PATCHED = "org/gaul/s3proxy/nio2blob/AbstractNio2BlobStore.java"
# The listing's loop body, each entry under its own guard: an entry removed since the folder was
# read is not listed, and the entries after it still are.
FIX: tuple[tuple[str, str], ...] = (
    (
        "            for (var path : stream) {\n"
        '                logger.debug("examining: {}", path);\n',
        "            for (var path : stream) {\n"
        "              try {\n"
        '                logger.debug("examining: {}", path);\n',
    ),
    (
        "                                    .build()));\n"
        "                }\n"
        "            }\n"
        "        } catch (NoSuchFileException nsfe) {\n",
        "                                    .build()));\n"
        "                }\n"
        "              } catch (NoSuchFileException vanished) {\n"
        "                continue;  // removed since the folder was read: not an object\n"
        "              }\n"
        "            }\n"
        "        } catch (NoSuchFileException nsfe) {\n",
    ),
)


class S3ProxyFixError(RuntimeError):
    """The pinned S3Proxy source could not be fetched or patched."""


def classpath() -> str:
    """The class path of the S3 server: the fix in front of the release's jars."""
    return f"{FIX_JAR}:{S3PROXY_JARS_DIR}/*"


def installed() -> bool:
    """Whether ``lakehouse jars`` resolved S3Proxy and compiled its fix."""
    return FIX_JAR.is_file() and any(S3PROXY_JARS_DIR.glob("*.jar"))


def build(target: Path = FIX_JAR) -> Path | None:
    """Fetch the pinned release's source, apply ``FIX`` and compile the patched class (with its
    nested classes) into ``target``, against the release's jars; None without a compiler.

    Raises:
        S3ProxyFixError: the source could not be fetched, its checksum differs, or the fix no
            longer matches it (a new pin: check whether the release has the fix).
        subprocess.CalledProcessError: javac refused the patched source.
    """
    source = patched(_source_jar())
    with tempfile.TemporaryDirectory() as work:
        java = Path(work) / PATCHED
        java.parent.mkdir(parents=True)
        java.write_text(source)
        return compile_jar([java], [S3PROXY_JARS_DIR], target)


def patched(sources_jar: Path) -> str:
    """The patched class's source, out of the release's source jar."""
    with zipfile.ZipFile(sources_jar) as jar:
        source = jar.read(PATCHED).decode()
    for old, new in FIX:
        if source.count(old) != 1:
            raise S3ProxyFixError(
                f"The listing fix no longer matches {PATCHED} of the pinned S3Proxy: check "
                "whether that release has gaul/s3proxy 8732326a, and drop the fix if so."
            )
        source = source.replace(old, new)
    return source


def _source_jar() -> Path:
    """The pinned source jar, from the cache or the repository, its SHA-256 checked."""
    pin = tomllib.loads(PINS.read_text())["s3proxy"]["sources"]
    cached = IVY_CACHE / "s3proxy-sources" / Path(pin["path"]).name
    if not (cached.is_file() and _sha256(cached.read_bytes()) == pin["sha256"]):
        repository = os.environ.get(MIRROR_VARIABLE) or MAVEN_CENTRAL
        url = repository.rstrip("/") + "/" + pin["path"]
        try:
            with urllib.request.urlopen(url, timeout=60) as answer:
                body = answer.read()
        except OSError as error:
            raise S3ProxyFixError(f"Could not fetch {url}: {error}") from error
        if _sha256(body) != pin["sha256"]:
            raise S3ProxyFixError(f"{url} is not the pinned file: its SHA-256 differs")
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        partial.write_bytes(body)
        partial.replace(cached)
    return cached


def _sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()

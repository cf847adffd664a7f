"""MkDocs hooks of jaxmb's site (not part of the library).

- The Performance page includes ``benchmarks/README.md``, whose plot ``speedup.png``
  lives beside it: the hook adds that file to the site, next to the page.
- The library's docstrings use Sphinx roles (``:func:`inverse_dynamics```), which
  Markdown renders as ``:func:<code>...</code>``: the hook drops the role names.
"""

import os
import re

from mkdocs.structure.files import File

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROLE = re.compile(r":(?:func|class|mod|data|attr|meth|obj|exc|const):(?=<code>)")


def on_files(files, config):
    """Add benchmarks/speedup.png to the site as speedup.png."""
    files.append(File.generated(config, "speedup.png",
                                abs_src_path=os.path.join(_ROOT, "benchmarks", "speedup.png")))
    return files


def on_page_content(html, page, config, files):
    """Remove Sphinx role prefixes left in rendered docstrings."""
    return _ROLE.sub("", html)

"""Sphinx configuration of the course website; site/build.py prepares the sources and runs Sphinx
with ``-c site`` (``make site``). Jupyter notebooks via myst-nb, never executed; the theme and
MathJax ship in the wheels (requirements-site.txt), so the build and the pages need no network.

``LMCORE_SITE_NO_SOLUTIONS=1`` (set by ``site/build.py --no-solutions``, ``make site SOLUTIONS=0``):
the site of a graded class. build.py leaves the solution toggles out of the pages; here the
theme's repository button and Colab launch button go too (both open the repository's notebooks,
the instructor edition).

``LMCORE_SITE_LANG=zh`` (set by build.py for its second run): the Chinese edition, in Chinese
(the theme's words, and search: jieba splits the words, with the glossary's terms added from
``LMCORE_SITE_SEARCH_DICT``); its page for 03_x is zh/notebooks/03_x.ipynb in the repository."""

import importlib.util
import os
from pathlib import Path

LANG = os.environ.get("LMCORE_SITE_LANG", "en")

project = "lmcore"
author = "the lmcore authors"
html_title = (
    "lmcore：因果语言模型如何把文本变成训练信号"
    if LANG == "zh"
    else "lmcore: how a causal LM turns text into a training signal"
)
language = "zh_CN" if LANG == "zh" else "en"
if LANG == "zh":
    import logging

    try:
        import jieba

        jieba.setLogLevel(logging.WARNING)  # not its "Building prefix dict..." lines
    except ImportError:  # then the search finds no Chinese word; the site test says so
        pass
if LANG == "zh" and os.environ.get("LMCORE_SITE_SEARCH_DICT"):
    html_search_options = {"dict": os.environ["LMCORE_SITE_SEARCH_DICT"]}

extensions = ["myst_nb"]

# MathJax 3 from the sphinx-mathjax-offline wheel, copied into _static/mathjax/ (its own extension
# does just this, but does not declare itself safe for a parallel build).
MATHJAX = Path(importlib.util.find_spec("sphinx-mathjax-offline").origin).parent / "static"
mathjax_path = "mathjax/tex-chtml.js"

REPO = os.environ.get("LMCORE_SITE_REPO", "your-user/lmcore")
BRANCH = os.environ.get("LMCORE_SITE_BRANCH", "main")
NO_SOLUTIONS = os.environ.get("LMCORE_SITE_NO_SOLUTIONS", "").strip().lower() not in ("", "0", "false", "no")

# The committed outputs are the site's outputs: nothing runs. Widget views have no saved state
# (site/build.py replaces them by a note), so no widget JavaScript (it would come from a CDN).
nb_execution_mode = "off"
nb_ipywidgets_js = {}
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
html_extra_path = [os.environ["LMCORE_SITE_EXTRA"]] if os.environ.get("LMCORE_SITE_EXTRA") else []
html_static_path = ["_static", str(MATHJAX)]
html_css_files = ["lmcore-site.css"]
# search.html's snippets with each formula as plain text, not LaTeX source (deferred: it wraps
# searchtools.js, which the search page loads after the theme's scripts)
html_js_files = [("lmcore-search.js", {"defer": "defer"})]
html_copy_source = False  # the sources are the prepared copies: the download bar links the originals
html_show_sourcelink = False

html_theme = "sphinx_book_theme"
html_context = {"default_mode": "auto"}  # else a first visit logs "Got invalid theme mode" (an error)
html_theme_options = {
    "repository_url": f"https://github.com/{REPO}",
    "repository_branch": BRANCH,
    # the page 03_x is notebooks/03_x.ipynb in the repository (zh/notebooks/ for the Chinese)
    "path_to_docs": "zh/notebooks" if LANG == "zh" else "notebooks",
    "use_repository_button": not NO_SOLUTIONS,
    "use_download_button": False,
    "use_source_button": False,
    "launch_buttons": {} if NO_SOLUTIONS else {"colab_url": "https://colab.research.google.com"},
    "home_page_in_toc": True,
    "show_toc_level": 2,
}


def setup(app):
    if LANG == "zh":
        from sphinx.search.zh import SearchChinese

        class ChineseSearch(SearchChinese):
            """Sphinx 9.0's Chinese search ships the English snowball stemmer (its Latin words are
            stemmed in English) but its language_data.js sets ``window.Stemmer = ChineseStemmer``,
            which no script defines: every page then stops with "ChineseStemmer is not defined" and
            the search finds nothing. Naming the stemmer by what it is fixes both."""

            language_name = "English"

        app.add_search_language(ChineseSearch)

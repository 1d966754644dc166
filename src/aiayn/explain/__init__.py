"""The Illustrated Transformer, live: every step of one translation, from the model's own numbers.

    from aiayn.explain import explain, write_page

    data = explain(translator, "A dog runs on the beach.", beam_size=4)   # JSON-ready
    write_page(data, "explain/", lang="en")                               # explain/index.html

`record` reads the computation off the model as it runs, `search` keeps beam search's tree, `data`
puts both into the page's JSON, and `page` writes the self-contained page (static/: its script,
its style and its words in English and Chinese), which the server's page shows as a tab too.
"""

from aiayn.explain.data import explain
from aiayn.explain.page import write_page

__all__ = ["explain", "write_page"]

"""`aiayn serve`: an HTTP translation service on the public translation API.

- `app.py`: the FastAPI application (endpoints, limits, errors, the web page);
- `batcher.py`: sentences of concurrent requests gathered into one search;
- `metrics.py`: Prometheus metrics;
- `static/`: the web page (no CDN: it works offline).

Needs the `serve` extra: `pip install -e ".[serve]"`.
"""

"""The translation server's parts, without Lightning or Hydra: the requests it takes and their limits
(api.py), the models it serves (served.py), the batcher that decodes concurrent requests together
under a token budget (batcher.py), the FastAPI app (app.py) and the page to try a model (page.html).
task=serve (tasks/serve.py) builds them from the config and runs the app with uvicorn."""

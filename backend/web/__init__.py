"""The web layer: ``create_app(settings, services=None)`` and its routers."""

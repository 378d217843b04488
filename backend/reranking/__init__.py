"""The cross-encoder that reranks recalled memories: an adapter beside the embedder.

``backend.memory.rerank`` holds the stage and the ``Reranker`` port it calls; this package
holds the model (:mod:`backend.reranking.cross_encoder`), built in
``backend.engine.services`` and handed to the long-term memory.
"""

"""``distprove serve``: a long-running HTTP proving service, a Dask client of a local or existing
cluster whose workers keep the served keys resident.

* :mod:`~distprove.service.run`: the command (keys, token, cluster, server);
* :mod:`~distprove.service.app`: the HTTP routes (Starlette), the bearer token, the body limit;
* :mod:`~distprove.service.service`: accept (validate, store, journal, queue) and answer;
* :mod:`~distprove.service.journal`: the SQLite journal and the state folder (durable before 202);
* :mod:`~distprove.service.grouping`: requests of a key gathered into the batch's grouped proof tasks;
* :mod:`~distprove.service.metrics`: the Prometheus metrics; :mod:`~distprove.service.openapi`: the API's document.
"""

"""The Konnectivity-style tunnel: a proxy server beside each tenant API server, an agent per worker."""

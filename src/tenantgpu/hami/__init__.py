"""HAMi's components on the wire: webhook, scheduler, device plugin, metrics."""

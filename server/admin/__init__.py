"""The admin API: what the gateway received, queued, ran and delivered (typed models, filters, retry,
replay), its OpenAPI description, and the operating endpoints (`/readyz`, `/metrics`)."""

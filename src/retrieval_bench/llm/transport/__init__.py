"""Floor 1, HTTP safety: what every request goes through. Keys sent only where allowed and masked
(credentials), the guarded HTTP client with its deadlines and refused redirects (connection), one
shared pause after a 429/529/503 (ratelimit), and what a failure means (errors)."""

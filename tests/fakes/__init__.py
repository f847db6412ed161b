"""Loopback fakes of the external services hookwise talks to, for tests."""

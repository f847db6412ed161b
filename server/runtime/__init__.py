"""The gateway runtime: main session, heartbeats, agent runs, model providers, delivery."""

"""The door and HTTP ingress: the HTTP protocol, authentication, client addresses, bodies, the hook
endpoint and dispatch (the one narrow interface from HTTP to durable state and the runtime)."""

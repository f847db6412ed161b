"""Pull sources: messages from brokers (Redis Streams, NATS JetStream, RabbitMQ, Amazon SQS) entering the hook
rules as if POSTed to a mapped path, with the door's guarantees (`sources:` in the config).

`enter` judges one message and stores it; `core` is the consumer loop every broker shares (batches
bounded by `maxInFlight`, acknowledgement after the commit, reconnection with backoff) and the
state every surface reads; one module per broker; `manager` starts them with the gateway."""

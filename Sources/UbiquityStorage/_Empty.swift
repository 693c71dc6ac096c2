// Keeps the target non-empty while the engine is written; harmless once it exists.

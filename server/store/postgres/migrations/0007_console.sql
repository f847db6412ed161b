-- hookwise store, version 7: the console filters the request log by path.
CREATE INDEX request_log_path ON request_log (path, seq);

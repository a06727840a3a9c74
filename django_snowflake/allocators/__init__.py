"""Worker-ID allocators: where a process gets the worker slot its generator issues under."""

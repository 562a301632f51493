"""Agent memory: ``memory_*`` tools the server runs itself, one journal per workspace (reference §14).

scope.py     which workspace a request belongs to (header, declared cwd, launch directory)
records.py   a record, and the checks on keys, values, tags and importance
journal.py   the NDJSON journal, its checkpoint and lock on disk
store.py     one workspace's records (MemoryStore) and every open workspace (MemoryBank)
tools.py     the six tools and their execution
fragment.py  the instruction fragment and its bootstrap listing, frozen per conversation
decorator.py the loop around the generation path (built only when memory is on)
"""

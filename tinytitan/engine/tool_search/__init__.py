"""Tool search the server runs itself (issue 39): deferred tools found by a regex or BM25, inside the request.

ranking.py  what a search matches: a tool's searchable text, the regex and the BM25 ranking
rounds.py   the loop around the generation: a call to the search tool runs here and the answer goes on
"""

"""The pytest plugin users' own test suites get with the package (issue 27 item 7).

    pytest_plugin: registered through the ``pytest11`` entry point (pyproject.toml);
                   fixtures walrus_home, walrus_embedder, walrus_memory,
                   walrus_relayer (relayer_mock over HTTP, fault knobs) and
                   walrus_agents (agents with their own keys, one Walrus)

Nothing here is imported by the library; docs/testing.md is its page.
"""

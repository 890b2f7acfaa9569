"""The screens behind safety.py: what may enter memory and what may reach a model.

    capture:  secret_redaction <- secret_checks (validated detectors; secret_ids,
              secret_phrases, secret_languages, secret_labelled) -> "[REDACTED:<kind>]";
              capture_hedges (hedges and hypotheticals are not facts; extract.py)
    prompt:   classifier (the learned first layer) + injection (rule layers:
              injection_patterns, injection_tables, injection_concepts,
              injection_intents, injection_spaced, semantic prototypes)
              -> prompt_screen (the one screen every path runs)
              -> memory_blocks (nonce-framed blocks put into a prompt)
    format_chars: invisible format characters shown or dropped before screening
    tables:   capture_patterns (safety's capture filter and fact screen) and the
              injection tables; injection_spaced reads their vocabulary
"""

"""The rule engine: YAML rules (schema), condition matching, evaluation and ranking."""

"""Rules as strict data: schema (what a rule file may say), conditions, the text language,
the registry (every rule, fix library and text table, checked against each other) and the
engine that turns them into findings. See schema.py for the rule file format."""

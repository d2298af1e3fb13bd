"""Rule files of diag: one TOML file per rule (see diag/rules.py for the format)."""

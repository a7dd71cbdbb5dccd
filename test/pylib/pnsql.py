"""SQL literals for Python tests that write SQL scripts (test/e2e/hostile)."""
import json


def sql_text(s):
    if s is None:
        return "NULL"
    return "'" + s.replace("'", "''") + "'"


def sql_bytea(b):
    if b is None:
        return "NULL::bytea"
    return "'\\x" + b.hex() + "'::bytea"


def sql_jsonb(obj):
    """obj is a Python value (dumped as JSON) or a str of raw JSON text."""
    if obj is None:
        return "NULL::jsonb"
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=True)
    return sql_text(text) + "::jsonb"

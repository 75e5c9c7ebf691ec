"""PostgreSQL: a trigger refuses UPDATE and DELETE on audit entries.

The only deletes let through are the retention purge's, which turns on the transaction-local
setting ``aiconsole.audit_purge`` first (see ``aiconsole.audit.purge``). Other databases rely on
the model's own refusals and on the hash chain.
"""

from django.db import migrations

FORWARDS = """
CREATE OR REPLACE FUNCTION aiconsole_audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('aiconsole.audit_purge', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit entries are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER aiconsole_audit_append_only
    BEFORE UPDATE OR DELETE ON aiconsole_auditentry
    FOR EACH ROW EXECUTE FUNCTION aiconsole_audit_append_only();
"""

BACKWARDS = """
DROP TRIGGER IF EXISTS aiconsole_audit_append_only ON aiconsole_auditentry;
DROP FUNCTION IF EXISTS aiconsole_audit_append_only();
"""


class PostgreSQLOnly(migrations.RunSQL):
    """RunSQL that does nothing on other database vendors."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [
        ("aiconsole", "0002_audit_chains"),
    ]

    operations = [
        PostgreSQLOnly(FORWARDS, BACKWARDS),
    ]

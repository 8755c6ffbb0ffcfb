"""Configuration read through OAM: tables, schema."""

from __future__ import annotations

from laredo.v1 import oam_pb2

from laredo_cli.commands.common import Context, Registrar, print_json, table_name, text_or_dash


def register(commands: Registrar) -> None:
    commands.add(
        "tables", help="configured tables with sources and targets",
        description="Every configured table with its source and target (one line per table and target). "
                    "OAM RPC ListTables.",
        examples=["laredo tables", "laredo tables --json | jq -r '.tables[].table'"], handler=run_tables)

    schema = commands.add(
        "schema", help="the columns of a table",
        description="The columns of a table as the running services report them: position, name, type, "
                    "NOT NULL and primary key. OAM RPC GetTableSchema.",
        examples=["laredo schema public.users", "laredo schema users --json"], handler=run_schema)
    schema.add_argument("table", type=table_name, metavar="SCHEMA.TABLE",
                        help="the table (schema defaults to public)")


def run_tables(ctx: Context) -> None:
    answer = ctx.oam.call("ListTables", oam_pb2.ListTablesRequest())
    if ctx.json:
        return print_json(ctx, answer)
    ctx.output.table(
        ["TABLE", "SOURCE", "SOURCE TYPE", "TARGET", "PRIMARY KEY"],
        [[f"{t.schema}.{t.table}", t.source_id, text_or_dash(t.source_type), text_or_dash(t.target_type),
          text_or_dash(t.primary_key)] for t in answer.tables],
        empty="(no table configured)")


def run_schema(ctx: Context) -> None:
    table = ctx.args.table
    answer = ctx.oam.call("GetTableSchema", oam_pb2.GetTableSchemaRequest(schema=table.schema, table=table.table))
    if ctx.json:
        return print_json(ctx, answer)
    ctx.output.table(
        ["#", "COLUMN", "TYPE", "NOT NULL", "PRIMARY KEY"],
        [[str(c.ordinal_position), c.column_name, c.data_type, "yes" if c.not_null else "no",
          str(c.primary_key_ordinal or 1) if (c.is_primary_key or c.primary_key_ordinal) else "-"]
         for c in answer.columns],
        right=[0], empty="(no column reported)")

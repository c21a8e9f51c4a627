"""Querysets compiled to SQL once per database, then run again with fresh values.

The crowd's submit and hand-out issue the same dozen statements for every HIT, and
building and compiling them through the ORM every time was half of the Python time per
HIT (benchmarks/README.md, "Statements per HIT"). A `Prepared` statement is still written
as a queryset, so its SQL is exactly what the ORM sends on that database (row locks on
PostgreSQL, none on SQLite): the queryset is built once with stand-in ids for its
parameters, compiled by the connection's own compiler, and its SQL kept; each run passes
the real ids in the stand-ins' places and applies the column converters the ORM would
(JSON, datetimes on SQLite). Rows come back as tuples (`rows`), or as the queryset's model
instances with their `select_related` rows attached (`objects`), made as the ORM makes them.

Only whole-number parameters can be prepared (ids, counts): other values are the
statement's constants, fixed when it is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import Field, Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.models.sql import Query, UpdateQuery

# Stand-ins for the parameters while compiling: whole numbers that fit a 32-bit column
# (the ORM refuses larger ones for an integer lookup) and no row or constant ever holds.
_STAND_IN = 2_000_000_000


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]  # the constants, with stand-ins where parameters go
    slots: tuple[tuple[int, int], ...]  # (position in params, parameter number)
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]
    width: int | None  # the columns callers see, when the SQL selects more (ordering)
    select: list[Any]  # the compiler's selected columns and what they build (`objects`)
    klass_info: dict[str, Any] | None


class Prepared:
    """One statement: `build(*ids)` returns its queryset (or an update query)."""

    def __init__(self, build: Callable[..., QuerySet[Any] | Query], arity: int) -> None:
        self._build = build
        self._arity = arity
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    def rows(self, *ids: int) -> list[tuple[Any, ...]]:
        """Run the statement with these ids in its parameters' places; return its rows."""
        compiled = self._compiled_here()
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, _params(compiled, ids))
            rows = cursor.fetchall()
        if compiled.width is not None:
            rows = [row[: compiled.width] for row in rows]
        if not compiled.converters:
            return [tuple(row) for row in rows]
        return [_converted(row, compiled.converters) for row in rows]

    def objects(self, *ids: int) -> list[Any]:
        """Run a model queryset's statement; return its instances, as iterating it would."""
        compiled = self._compiled_here()
        info = compiled.klass_info
        if info is None:
            raise TypeError("objects() needs a queryset of model instances, not of values")
        start, end = info["select_fields"][0], info["select_fields"][-1] + 1
        names = [column[0].target.attname for column in compiled.select[start:end]]
        populators = get_related_populators(info, compiled.select, connection.alias)
        instances = []
        for row in self.rows(*ids):
            instance = info["model"].from_db(connection.alias, names, row[start:end])
            for populator in populators:
                populator.populate(row, instance)
            instances.append(instance)
        return instances

    def execute(self, *ids: int) -> int:
        """Run a statement that writes (an update); return the number of rows it touched."""
        compiled = self._compiled_here()
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, _params(compiled, ids))
            return cursor.rowcount

    def _compiled_here(self) -> _Compiled:
        key = (connection.alias, connection.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile()
        return compiled

    def _compile(self) -> _Compiled:
        stand_ins = [_STAND_IN + number for number in range(self._arity)]
        built = self._build(*stand_ins)
        query = built.query if isinstance(built, QuerySet) else built
        compiler = query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        slots = tuple(
            (position, stand_ins.index(value))
            for position, value in enumerate(params)
            if type(value) is int and value in stand_ins
        )
        if {number for _, number in slots} != set(range(self._arity)):
            raise ValueError(f"a parameter is missing from the prepared SQL: {sql}")
        select = getattr(compiler, "select", None) or []
        fields = [column[0] for column in select[: compiler.col_count]] if select else []
        converters = compiler.get_converters(fields) if fields else {}
        return _Compiled(
            sql=sql,
            params=tuple(params),
            slots=slots,
            converters=tuple(
                (pos, tuple(convs), expr) for pos, (convs, expr) in converters.items()
            ),
            width=compiler.col_count if select and compiler.has_extra_select else None,
            select=list(select),
            klass_info=getattr(compiler, "klass_info", None),
        )


def _params(compiled: _Compiled, ids: Sequence[int]) -> list[Any]:
    params = list(compiled.params)
    for position, number in compiled.slots:
        params[position] = ids[number]
    return params


def _converted(row: Sequence[Any], converters: tuple[Any, ...]) -> tuple[Any, ...]:
    values = list(row)
    for position, convs, expression in converters:
        value = values[position]
        for converter in convs:
            value = converter(value, expression, connection)
        values[position] = value
    return tuple(values)


def objects_insert(objects: Sequence[Model]) -> None:
    """Insert new instances of one model in one statement and set their ids, as
    `bulk_create` does, with SQL built once per model and row count (the ORM's insert
    compiler prepares every value of every row through the field: a tenth of a
    submission's time for its 18 judgements). Values are prepared as `save` prepares
    them (`auto_now_add` filled in). Where the database cannot return the new ids of a
    multi-row INSERT, `bulk_create` does it."""
    if not objects:
        return
    model = type(objects[0])
    fields = [f for f in model._meta.concrete_fields if f is not model._meta.auto_field]
    if not _plainly_inserted(fields, len(objects)):
        model._default_manager.bulk_create(objects)
        return
    columns = _columns(model, fields)
    params = [
        _db_value(column, column.value(instance)) for instance in objects for column in columns
    ]
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(model, fields, len(objects)), params)
        ids = cursor.fetchall()
    for instance, (pk,) in zip(objects, ids, strict=True):
        instance.pk = pk
        instance._state.adding = False
        instance._state.db = connection.alias


def _plainly_inserted(fields: Sequence[Any], n_rows: int) -> bool:
    """Whether one INSERT of these values, returning the new ids, does what `bulk_create`
    does: no value the database fills in itself, and few enough parameters."""
    features = connection.features
    limit = features.max_query_params
    return (
        features.can_return_rows_from_bulk_insert
        and (limit is None or len(fields) * n_rows <= limit)
        and not any(field.has_db_default() or field.generated for field in fields)
    )


# Columns whose value, when it is already of the Python type given here (or None), goes to
# the database as it is on every backend: preparing it through the field changes nothing.
_PLAIN_TYPES = {
    "AutoField": int,
    "BigAutoField": int,
    "BigIntegerField": int,
    "BooleanField": bool,
    "CharField": str,
    "ForeignKey": int,
    "IntegerField": int,
    "PositiveBigIntegerField": int,
    "PositiveIntegerField": int,
    "PositiveSmallIntegerField": int,
    "SmallIntegerField": int,
    "TextField": str,
}


@dataclass(frozen=True)
class _Column:
    """How one field's value goes into an INSERT or UPDATE (worked out once per model)."""

    field: Any
    plain: type | None  # a value of exactly this type goes as it is (_PLAIN_TYPES)
    fills_in: bool  # the field sets its own value on insert (`pre_save`: auto_now_add, files)

    def value(self, instance: Model) -> Any:
        if self.fills_in:
            return self.field.pre_save(instance, True)
        return getattr(instance, self.field.attname)


_COLUMNS: dict[tuple[type[Model], tuple[str, ...]], list[_Column]] = {}


def _columns(model: type[Model], fields: Sequence[Any]) -> list[_Column]:
    key = (model, tuple(field.name for field in fields))
    if key not in _COLUMNS:
        _COLUMNS[key] = [
            _Column(
                field=field,
                plain=_PLAIN_TYPES.get(field.get_internal_type()),
                fills_in=type(field).pre_save is not Field.pre_save,
            )
            for field in fields
        ]
    return _COLUMNS[key]


def _db_value(column: _Column, value: Any) -> Any:
    """A value as `save` hands it to the database (`get_db_prep_save`)."""
    if value is None or type(value) is column.plain:
        return value
    return column.field.get_db_prep_save(value, connection)


_UPDATES: dict[tuple[str, str, type[Model], tuple[str, ...]], str] = {}


def fields_update(instance: Model, names: Sequence[str]) -> None:
    """`instance.save(update_fields=names)`, through SQL built once per model and fields.

    Only for fields that `save` would not change itself (no `auto_now`), on a model that
    nothing listens to the saves of (no signal receivers: none are sent).
    """
    model = type(instance)
    fields = [model._meta.get_field(name) for name in names]
    key = (connection.alias, connection.vendor, model, tuple(names))
    if key not in _UPDATES:
        quote = connection.ops.quote_name
        _UPDATES[key] = (
            f"UPDATE {quote(model._meta.db_table)} SET "
            f"{', '.join(f'{quote(field.column)} = %s' for field in fields)} "
            f"WHERE {quote(model._meta.pk.column)} = %s"
        )
    columns = _columns(model, [*fields, model._meta.pk])
    values = [getattr(instance, column.field.attname) for column in columns]
    params = [_db_value(column, value) for column, value in zip(columns, values, strict=True)]
    with connection.cursor() as cursor:
        cursor.execute(_UPDATES[key], params)
        if cursor.rowcount == 0:  # as `save` says it
            raise DatabaseError("Save with update_fields did not affect any rows.")


_INSERTS: dict[tuple[str, str, type[Model], int], str] = {}


def _insert_sql(model: type[Model], fields: Sequence[Any], n_rows: int) -> str:
    key = (connection.alias, connection.vendor, model, n_rows)
    if key not in _INSERTS:
        quote = connection.ops.quote_name
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        _INSERTS[key] = (
            f"INSERT INTO {quote(model._meta.db_table)} "
            f"({', '.join(quote(field.column) for field in fields)}) "
            f"VALUES {', '.join([row] * n_rows)} "
            f"RETURNING {quote(model._meta.pk.column)}"
        )
    return _INSERTS[key]


def update_query(queryset: QuerySet[Any], **values: Any) -> Query:
    """The UPDATE that `queryset.update(**values)` sends, to prepare (`Prepared.execute`)."""
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    return query
